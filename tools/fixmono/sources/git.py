"""The one git layer: every git process the package starts is started here
(tests/test_safety.py checks that nothing else starts one).

A checkout make_patch reads is untrusted input: its config, attributes and
hooks may name programs. Three rules keep every one of them from running:

1. No transport, ever: GIT_ALLOW_PROTOCOL is empty, which git obeys above any
   config, so no fetch (a partial clone's lazy fetch included), ssh, ext::,
   remote helper, upload-pack/receive-pack, credential helper or askpass can
   start. Objects reach a checkout (for --branch) through a pack piped into
   `git unpack-objects`, not through a fetch.
2. Objects are read in a scratch repository of ours (sources/scratch.py) that borrows
   the checkout's object store: the checkout's config is not even read there.
3. In the checkout itself only the plumbing commands in CHECKOUT_COMMANDS run,
   with hooks, fsmonitor, pager, editor, signing and every filter/diff/merge
   driver that any config layer defines switched off (`Checkout.git`).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from fixmono.model.errors import one_line
from fixmono.sources.processes import kill_group

# Config for every git call: each key names a program (or makes git start one).
SAFE_CONFIG = {
    "core.hooksPath": os.devnull, "core.fsmonitor": "false", "core.pager": "cat", "core.editor": ":",
    "sequence.editor": ":", "core.askPass": "", "core.sshCommand": "false", "core.gitProxy": "",
    "core.alternateRefsCommand": "", "credential.helper": "", "gpg.program": "false",
    "gpg.ssh.program": "false", "gpg.x509.program": "false", "gpg.openpgp.program": "false",
    "log.showSignature": "false", "commit.gpgSign": "false", "tag.gpgSign": "false", "diff.external": "",
    "protocol.allow": "never", "gc.auto": "0", "maintenance.auto": "false", "core.untrackedCache": "false",
    "uploadpack.packObjectsHook": "", "submodule.recurse": "false", "fetch.recurseSubmodules": "false",
}
# Config keys of named drivers: each is overridden for every name any layer defines.
DRIVER_KEY = re.compile(r"^(?P<section>filter|diff|merge)\.(?P<name>.+)\.(?P<key>[^.]+)$", re.S)
DRIVER_PROGRAMS = {"filter": {"clean": "", "smudge": "", "process": "", "required": "false"},
                   "diff": {"textconv": "", "command": ""}, "merge": {"driver": ""}}
# What make_patch may run inside a checkout: plumbing that reads refs and the
# index, and the two writes of --branch (objects, then one new ref).
CHECKOUT_COMMANDS = {"rev-parse", "symbolic-ref", "for-each-ref", "show-ref", "check-ref-format", "status",
                     "config", "worktree", "unpack-objects", "update-ref"}


class GitError(Exception):
    """git failed; the message is one line."""


def clean_env(config: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment for git: no GIT_* variable of the caller (GIT_DIR set by a
    hook, GIT_OBJECT_DIRECTORY, GIT_CONFIG_PARAMETERS, GIT_SSH_COMMAND...), no
    transport, no prompt, no pager, and SAFE_CONFIG plus `config` on top of
    every config file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in ("SSH_ASKPASS", "PAGER")}
    env.update(GIT_ALLOW_PROTOCOL="", GIT_NO_LAZY_FETCH="1", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat",
               PAGER="cat", GIT_EDITOR=":", GIT_ASKPASS="false", GIT_OPTIONAL_LOCKS="0",
               GIT_LITERAL_PATHSPECS="1", GIT_ATTR_NOSYSTEM="1")
    settings = {**SAFE_CONFIG, **(config or {})}
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env.update(extra)
    return env


def run_git(cwd: Path | None, *args: str, env: dict[str, str] | None = None,
            input: bytes | str | None = None, binary: bool = False) -> subprocess.CompletedProcess:
    """git in `cwd`; never raises for git's exit code (the caller decides).
    Text is UTF-8 whatever the locale, undecodable bytes kept as surrogates;
    `binary` returns stdout as bytes (file contents, patches: CRs kept)."""
    data = input.encode("utf-8", "surrogateescape") if isinstance(input, str) else input
    proc = subprocess.Popen(["git", *args], cwd=cwd, stdin=None if data is None else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env if env is not None else clean_env(), start_new_session=True)
    try:
        out, err = proc.communicate(data)
    except BaseException:
        # subprocess.run waits only 0.25 s after a Ctrl-C/SIGTERM; a git killed while it writes
        # (held in the kernel under I/O load) could then still create files after the clean-up
        # removed its scratch repository (seen once in CI: test_hostile's SIGTERM case); the
        # processes git started itself (index-pack, a helper) too: its whole group is killed
        kill_group(proc)
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out if binary else text(out), text(err))


def text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def as_git_text(name: str) -> str:
    """`name` as git will echo it back: an argument decoded from the locale
    (surrogates under LC_ALL=C) is compared in the same form as git's output."""
    return text(os.fsencode(name))



class Checkout:
    """A repository the user pointed make_patch at: git runs in it only here."""

    def __init__(self, path: Path):
        self.path = path
        self._env: dict[str, str] | None = None

    def git(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
        if args[0] not in CHECKOUT_COMMANDS:
            raise AssertionError(f"git {args[0]} is not allowed in a checkout")
        if self._env is None:
            self._env = clean_env(self._driver_overrides())
        return run_git(self.path, *args, env=self._env, input=input)

    def _driver_overrides(self) -> dict[str, str]:
        """Every filter/diff/merge driver any config layer (includes too) names,
        with its programs emptied. Reading config runs nothing."""
        proc = run_git(self.path, "config", "--null", "--name-only", "--list")
        if proc.returncode:
            raise GitError(f"git cannot read its config: {one_line(proc.stderr)}")
        overrides = {}
        for key in proc.stdout.split("\0"):
            match = DRIVER_KEY.match(key)
            if match:
                prefix = f"{match['section']}.{match['name']}"
                overrides.update({f"{prefix}.{k}": v for k, v in DRIVER_PROGRAMS[match["section"]].items()})
        return overrides
