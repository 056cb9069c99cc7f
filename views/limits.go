package views

// Limits are the world's limits as JSON (GET and POST /v1/limits, `aosd
// limits`, status, config and manifest records): kernel.Limits
// (records.Limits) with every limit shown, zero included. It has the same
// fields as records.Limits, so the two convert into each other (Limits(l),
// kernel.Limits(v)) and a limit added there fails the build until it is
// added here; the JSON names are records.LimitNames (limits_test.go).
type Limits struct {
	MaxEffects               int `json:"max_effects"`
	MaxDomainEvents          int `json:"max_domain_events"`
	MaxOutputBytes           int `json:"max_output_bytes"`
	MaxEventBytes            int `json:"max_event_bytes"`
	MaxCascadeDepth          int `json:"max_cascade_depth"`
	MaxStepsPerInput         int `json:"max_steps_per_input"`
	MaxRecordsPerInput       int `json:"max_records_per_input"`
	MaxBytesPerInput         int `json:"max_bytes_per_input"`
	IdempotencyWindowSeconds int `json:"idempotency_window_seconds"`
	MaxIdempotencyKeys       int `json:"max_idempotency_keys"`
	MaxFramesPerIntent       int `json:"max_frames_per_intent"`
	MaxFrameBytes            int `json:"max_frame_bytes"`
	MaxSettledIntents        int `json:"max_settled_intents"`
	MaxParkedPerInstance     int `json:"max_parked_per_instance"`
}
