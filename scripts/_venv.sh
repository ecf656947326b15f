# Sourced by the scripts: make .venv match uv.lock exactly, installing uv first if needed.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if python3 -m uv --version >/dev/null 2>&1; then
  uv=(python3 -m uv)
elif command -v uv >/dev/null 2>&1; then
  uv=(uv)
else
  echo "installing uv (the lock file's installer) with pip..." >&2
  python3 -m pip install --quiet --disable-pip-version-check uv >&2
  uv=(python3 -m uv)
fi
# Bytecode as a shipped app has it: without it every spawn recompiles ~1,500 modules (+85 ms).
"${uv[@]}" sync --quiet --frozen --extra dev --compile-bytecode --project "$repo" >&2
py="$repo/.venv/bin/python"
"$py" -m compileall -q "$repo/sidecar" >&2
