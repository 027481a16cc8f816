// SpawnThread: starts a thread at the CPU priority the process started with, whatever the
// priority of the thread that asks.
//
// The model lifecycle threads run at nice +10 so that loads yield to inference
// (docs/model-lifecycle.md), and a Linux thread inherits its creator's nice value — which an
// unprivileged process cannot lower again. So every thread a load creates that outlives it (a
// version's worker threads, ONNX Runtime's intra-op pool) is started through here: from a
// thread at the normal priority the thread is created directly; from any other, a spawner thread
// that kept the normal priority creates it.
//
// InitThreadSpawner() records the normal priority (the calling thread's) and starts the spawner;
// call it once at start from a thread at the normal priority, before any thread lowers its own
// (the model repository manager does, on construction). Without it, SpawnThread() creates the
// thread directly, as std::thread would.
//
// A thread that cannot be created (the process's or the container's thread limit: ulimit -u,
// a pids cgroup) is kResourceExhausted, never an exception: a load that asks for more threads
// than the machine gives fails like any other load, and the server serves on (probe 53).
//
// Thread safety: both functions from any thread.
#pragma once

#include <functional>
#include <thread>

#include "harrier/status.h"

namespace harrier {

void InitThreadSpawner();
StatusOr<std::thread> SpawnThread(std::function<void()> fn);

}  // namespace harrier
