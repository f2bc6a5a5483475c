"""fixmono.fixes: the catalogue, one folder per fix (fixes/<upstream>/<name>/)."""
