# Helpers shared by the bench/ scripts; sourced (`. bench/lib.sh`), not run.

# The release binary to measure: $TOKSCOPE_BIN when set (already built), else
# `cargo build --release --bin tokscope` into BENCH_TARGET_DIR when set (keeps
# the release build apart from a dev target directory), else CARGO_TARGET_DIR
# (or ./target). Prints its absolute path.
tokscope_bin() {
  if [ -n "${TOKSCOPE_BIN:-}" ]; then
    realpath "$TOKSCOPE_BIN"
    return
  fi
  local dir=${BENCH_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}
  CARGO_TARGET_DIR=$dir cargo build --release --quiet --bin tokscope >&2
  realpath "$dir/release/tokscope"
}

# Unpacks the xz-compressed binaries in folder $1 (a `--pack` of
# bench/gpu_check.sh or bench/cores.sh) into folder $2, executable; Python's
# lzma where the xz command is missing.
unpack_bins() {
  mkdir -p "$2"
  local f out
  for f in "$1"/*.xz; do
    out="$2/$(basename "$f" .xz)"
    if command -v xz >/dev/null; then xz -dc "$f" >"$out"; else
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$out"
    fi
    chmod +x "$out"
  done
}

# Whether section $1 is among the words of $SECTIONS.
section() { [[ " $SECTIONS " == *" $1 "* ]]; }

# Seconds of one whole process (its stdout discarded).
whole() {
  python3 - "$@" <<'PY'
import subprocess, sys, time
t = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(f"{time.perf_counter() - t:.3f}")
PY
}

# The smallest of REPEAT (default 3) runs of a command that prints seconds.
best() {
  local b=""
  for _ in $(seq "${REPEAT:-3}"); do
    local t; t=$("$@")
    b=$(python3 -c "print(min(float('$t'), float('${b:-inf}')))")
  done
  echo "$b"
}

# A free TCP port on loopback (the OS's pick; free until someone binds it).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Waits up to 30 s for something to listen on loopback port $1; exits the script otherwise.
wait_port() {
  for _ in $(seq 300); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2; exit 1
}

# Starts a moto S3 server on a free loopback port (S3_PORT) and
# bench/latency_proxy.py in front of it delaying every packet by $1 ms each
# way (PROXY_PORT), both stopped when the script exits; exports the
# credentials and settings moto takes, and waits for both to listen.
start_s3_behind_proxy() {
  S3_PORT=$(free_port)
  python3 -m moto.server -H 127.0.0.1 -p "$S3_PORT" >/dev/null 2>&1 &
  local moto=$!
  PROXY_PORT=$(free_port)
  python3 bench/latency_proxy.py "$PROXY_PORT" "$S3_PORT" "$1" >/dev/null 2>&1 &
  local proxy=$!
  trap "kill $moto $proxy 2>/dev/null" EXIT
  export AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
  wait_port "$S3_PORT"
  wait_port "$PROXY_PORT"
}

# The release build of example $1 (examples/$1.rs), built where tokscope_bin
# builds; prints its absolute path.
example_bin() {
  local dir=${BENCH_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}
  CARGO_TARGET_DIR=$dir cargo build --release --quiet --example "$1" >&2
  realpath "$dir/release/examples/$1"
}
