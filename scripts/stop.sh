# Sourced by the test scripts: `stop_process PID` ends a server started in the background
# and waits for it to exit, so that its data folder can be removed afterwards. An
# `agentchat` instance drains on SIGTERM (it may still write its database while its
# streams end, up to SHUTDOWN_GRACE_SECONDS); after 40 s it is killed.
stop_process() {
  local pid="$1"
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 400); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
