"""transformers UMT5: the decoder output scaled by d_model**-0.5 for every
checkpoint, also those configured with tie_word_embeddings false (the
google/umt5 ones); fixed in transformers 5.24.0.

Imported by `fixmono import` from the upstream change as released (the lines
it changes between the 5.23.0 and 5.24.0 wheels: github.com, where its pull
request is, cannot be reached from here). Written by hand: repro.py and the
fields below.
"""
from fixmono.engines.imported import declare
from fixmono.model.fix import Dep3, lazy

FIX = declare(__file__, id="transformers-umt5-decoder-output-scale", upstream="transformers",
              dep3=Dep3(origin="upstream, transformers 5.24.0 (its change between the 5.23.0 and 5.24.0 wheels)",
                        forwarded="not-needed", applied_upstream="transformers 5.24.0",
                        last_update="2026-11-26"),
              backends=("cuda", "rocm", "cpu"),
              reproduce=lazy(f"{__package__}.repro:reproduce"), repro_needs="cpu")
