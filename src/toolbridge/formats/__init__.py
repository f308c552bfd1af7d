"""Provider wire formats: one module per provider, each with definitions out, calls in
(whole and streamed) and results back."""
