package wire

// Checkpoints are kept in the views bucket (DefaultViewsKV), one KV entry
// per thread; fanout lists threads by reading the keys and the summary
// headers (HeaderSeq, HeaderStatus, HeaderLastEvent) without the records.

// CheckpointKey returns the KV key <tenant>.<token> of a thread's checkpoint
// in the views bucket. The token alphabet is a subset of the KV key alphabet.
func CheckpointKey(tenant, token string) string {
	return tenant + "." + token
}

// ParseCheckpointKey splits a CheckpointKey.
func ParseCheckpointKey(key string) (tenant, token string, err error) {
	return splitTenantToken(key, key)
}
