// ServerReadiness: whether the server as a whole still wants new traffic, apart from its
// models. The readiness probes (REST GET /v2/health/ready, gRPC ServerReady) answer "not ready"
// while it says draining, so that load balancers and Kubernetes endpoints stop sending before
// the listeners close (docs/deployment.md, "The drain"). Liveness never consults it.
//
// The implementation is the process's shutdown timeline (core/shutdown_timeline.h).
#pragma once

namespace harrier {

class ServerReadiness {
 public:
  virtual ~ServerReadiness() = default;
  // True once a shutdown has begun; never false again. Any thread; cheap (one atomic load).
  virtual bool draining() const = 0;
};

}  // namespace harrier
