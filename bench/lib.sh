# Sourced by the end-to-end bench scripts (grpc.sh, inline_execution.sh, tracing.sh): the shared
# kit's prepared bodies and wrk script, and the server's CPU time per request, which a load
# generator sharing the machine's cores does not distort.
BH=${BENCH_HOME:-$HOME/.cache/harrier-bench}
POST_LUA=$(dirname "${BASH_SOURCE[0]}")/../../shared/peers/post.lua
TCK=$(getconf CLK_TCK)

# use_kit_body MODEL: the kit's post.lua (wrk) sends the kit's binary-extension body for MODEL.
use_kit_body() {
  export BODY=$BH/bodies/$1.bin CTYPE=application/octet-stream
  IHCL=$(cat "$BH/bodies/$1.bin.ihcl")
  export IHCL
}

# cpu_ticks PID: the process's user + system CPU time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# us_per_request TICKS RESULT_LINE: CPU microseconds per request answered, from the ticks spent
# over a run and the run's "RESULT requests=N ..." line.
us_per_request() {
  local n
  n=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$2")
  echo $(($1 * 1000000 / TCK / (n > 0 ? n : 1)))
}
