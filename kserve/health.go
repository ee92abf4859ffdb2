package kserve

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthService is the standard gRPC health service (grpc.health.v1.Health)
// over ServerReady, as Kubernetes' gRPC probes and grpc_health_probe ask it:
// SERVING exactly when the server is ready (for the whole server, "", and
// for the protocol's service name), NOT_SERVING otherwise. grpc-go's own
// health server holds a status someone must set; this one asks each time.
type healthService struct {
	healthpb.UnimplementedHealthServer
	s *Server
}

// inferenceServiceName is the protocol's gRPC service, a name the health
// service answers besides "".
const inferenceServiceName = "inference.GRPCInferenceService"

// healthWatchPeriod is how often Watch asks ServerReady again.
const healthWatchPeriod = time.Second

func (h *healthService) status(ctx context.Context, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	if service != "" && service != inferenceServiceName {
		return 0, status.Errorf(codes.NotFound, "unknown service %q: this server has %q (or \"\" for the whole server)", service, inferenceServiceName)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if h.s.ServerReady(ctx) != nil {
		return healthpb.HealthCheckResponse_NOT_SERVING, nil
	}
	return healthpb.HealthCheckResponse_SERVING, nil
}

// Check answers the server's readiness now.
func (h *healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, err := h.status(ctx, req.GetService())
	if err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// Watch sends the status at once and again whenever it changes (asked
// every healthWatchPeriod); an unknown service is SERVICE_UNKNOWN, as the
// health protocol says for Watch.
func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	tick := time.NewTicker(healthWatchPeriod)
	defer tick.Stop()
	for {
		st, err := h.status(ctx, req.GetService())
		if err != nil {
			st = healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		}
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-tick.C:
		}
	}
}
