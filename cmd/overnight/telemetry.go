package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracing is the process's OpenTelemetry setup: an OTLP/HTTP exporter of
// the harness's spans, made only when the standard variables ask for one.
type tracing struct {
	tp *sdktrace.TracerProvider // nil: no export
}

// otlpWanted reports whether the environment asks for OTLP export of
// traces: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// set, and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func otlpWanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// newTracing sets up export when the environment asks for it. The
// exporter reads the standard OTEL_EXPORTER_OTLP_* variables itself
// (endpoint, headers, timeout, compression); the protocol is
// http/protobuf. The resource is service.name "overnight" (or
// OTEL_SERVICE_NAME) with OTEL_RESOURCE_ATTRIBUTES.
func newTracing(ctx context.Context) (*tracing, error) {
	if !otlpWanted(os.Getenv) {
		return &tracing{}, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(k); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%s: overnight exports traces over OTLP with http/protobuf only (unset it, or set http/protobuf and the collector's HTTP endpoint, port 4318)", k, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "overnight"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	return &tracing{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// provider is the tracer provider for the harness (nil: the global no-op).
func (t *tracing) provider() trace.TracerProvider {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp
}

// shutdown sends the spans still buffered, waiting at most a few seconds.
func (t *tracing) shutdown() error {
	if t == nil || t.tp == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return t.tp.Shutdown(ctx)
}
