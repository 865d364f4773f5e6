package fleet

// Insecure returns cfg without TLS: the control case of the TLS tests.
func Insecure(cfg Config) Config {
	cfg.insecure = true
	return cfg
}
