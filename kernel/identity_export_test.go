package kernel

// WithoutIdentity is cfg for a world that journals no identity and binds
// none into its intents, as code from before world identities wrote
// worlds: tests build such worlds with it, then open them as this code
// does.
func WithoutIdentity(cfg Config) Config {
	cfg.noIdentity = true
	return cfg
}
