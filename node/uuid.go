package node

import (
	"crypto/rand"
	"encoding/hex"
)

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
