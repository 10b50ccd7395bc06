//go:build quicgo_before_v065

package main

import (
	"io"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// newConnectionFileSeq for quic-go v0.61–v0.64, whose NewConnectionFileSeq takes the
// event schemas the trace declares (the QUIC schema, as quic-go's own interop
// logging passes it).
func newConnectionFileSeq(w io.WriteCloser, isClient bool, odcid quic.ConnectionID) *qlogwriter.FileSeq {
	return qlogwriter.NewConnectionFileSeq(w, isClient, odcid, []string{qlog.EventSchema})
}
