"""What the gateway tells its operators: OpenTelemetry traces (`tracing`) and Prometheus metrics (`metrics`)."""
