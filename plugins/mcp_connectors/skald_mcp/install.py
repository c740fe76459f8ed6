"""The dependency reconciler for a member's local-script connector (a stdio template
with ``files``): the template's files are copied into the member's sandbox, under
``~/.skald-connectors/<name>/``, and their dependencies installed there —
``pip install --target .pydeps`` for a ``requirements.txt`` (put on the server's
``PYTHONPATH``), ``npm ci --omit=dev`` for a ``package.json`` — only when the content
hash of the files changed. It runs inside the sandbox as the member (through
``HostApi.sandbox_spawn``), never with the host's Python; at activation and at every
start of the member's runtime, where an unchanged connector is a hash match and nothing
more. A failure (no pip or npm in the sandbox, no network for it) is the connector's
error, a coded one the member reads in their language. The sandbox image
(``sandbox/image/packages.txt``) ships pip, node and npm; fetching packages needs the
sandbox's network (the instance's ``sandbox.network``), or a requirements file or
lockfile that needs nothing fetched.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any, Mapping

ROOT = ".skald-connectors"
INSTALL_SECONDS = 600.0

INSTALLER = r'''
import importlib.util, json, os, shutil, subprocess, sys
target, digest = sys.argv[1], sys.argv[2]
files = json.loads(sys.stdin.read())
stamp = os.path.join(target, ".skald-hash")
try:
    with open(stamp) as f:
        if f.read() == digest:
            print(json.dumps({"status": "unchanged"}), flush=True)
            sys.exit(0)
except OSError:
    pass
if os.path.isdir(target):
    shutil.rmtree(target)
os.makedirs(target)
for rel, content in files.items():
    path = os.path.join(target, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)
error = None
if "requirements.txt" in files and importlib.util.find_spec("pip") is None:
    error = dict(code="install_pip_missing")
elif "requirements.txt" in files:
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--target", os.path.join(target, ".pydeps"),
                           "-r", os.path.join(target, "requirements.txt")], capture_output=True, text=True)
    if done.returncode:
        lines = (done.stderr or "").strip().splitlines()
        error = dict(code="install_pip_failed", detail=lines[-1][:300] if lines else "exit %d" % done.returncode)
if error is None and "package.json" in files:
    if shutil.which("npm") is None:
        error = dict(code="install_npm_missing")
    else:
        done = subprocess.run(["npm", "ci", "--omit=dev"], cwd=target, capture_output=True, text=True)
        if done.returncode:
            lines = (done.stderr or "").strip().splitlines()
            error = dict(code="install_npm_failed", detail=lines[-1][:300] if lines else "exit %d" % done.returncode)
if error is not None:
    print(json.dumps({"status": "failed", **error}), flush=True)
    sys.exit(0)
with open(stamp, "w") as f:
    f.write(digest)
print(json.dumps({"status": "installed"}), flush=True)
'''


#: What the installer may answer as its failure's ``code`` (``err_<code>`` of strings.py).
#: It runs in the member's sandbox, so an answer is checked against these, never trusted.
INSTALL_CODES = {"install_pip_missing": (), "install_pip_failed": ("detail",), "install_npm_missing": (), "install_npm_failed": ("detail",)}


def content_hash(files: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(files), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def folder(name: str) -> str:
    return f"{ROOT}/{name}"


async def reconcile(host: Any, member_id: str, name: str, files: Mapping[str, str]) -> str:
    """``installed`` or ``unchanged``; raises a coded ``SpecError`` with the reason
    (shown to the member on the connector's page, in their language)."""
    from skald_mcp.spec import SpecError

    process = await host.sandbox_spawn(member_id, ["/usr/bin/python3", "-c", INSTALLER, folder(name), content_hash(files)])
    try:
        process.stdin.write(json.dumps(dict(files)).encode())
        await process.stdin.drain()
        process.stdin.close()
        line = await asyncio.wait_for(process.stdout.readline(), INSTALL_SECONDS)
    finally:
        process.kill()
    try:
        answer = json.loads(line)
    except ValueError:
        raise SpecError(code="install_no_answer") from None
    if not isinstance(answer, dict):
        raise SpecError(code="install_no_answer")
    if answer.get("status") not in ("installed", "unchanged"):
        code = answer.get("code")
        if code not in INSTALL_CODES:
            raise SpecError(code="install_failed")
        raise SpecError(code=code, **{key: str(answer.get(key) or "")[:300] for key in INSTALL_CODES[code]})
    return str(answer["status"])
