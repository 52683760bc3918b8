"""What the gateway tells its operators: Prometheus metrics (`metrics`), the spans and counts of a run (`runs`) and
of a tool call (`toolcalls`), on the tracing helpers of `gateway.kernel.tracing`."""
