//go:build !quicgo_before_v065

package main

import (
	"io"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
)

// newConnectionFileSeq starts one connection's JSON-SEQ qlog. quic-go v0.65 writes
// the QUIC event schema itself; earlier releases take the schemas as an argument
// (qlogseq_before_v065.go, built for them by harness/endpoints/releases.py).
func newConnectionFileSeq(w io.WriteCloser, isClient bool, odcid quic.ConnectionID) *qlogwriter.FileSeq {
	return qlogwriter.NewConnectionFileSeq(w, isClient, odcid)
}
