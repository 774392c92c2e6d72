// Command tlog-cosign-check is an independent check of C2SP witness cosignatures for the tests:
// github.com/transparency-dev/formats (note.NewVerifierForCosignatureV1) over
// golang.org/x/mod/sumdb/note, not this project's code. It reads a checkpoint with its signature
// lines on stdin, verifies the log's signature with -log-key and a cosignature/v1 of every
// -witness-key, and prints each cosignature's time. Exit status 1 when any is missing or invalid.
// Module and version: go.mod (pinned from hack/versions.env).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

type keys []string

func (k *keys) String() string     { return strings.Join(*k, ",") }
func (k *keys) Set(v string) error { *k = append(*k, v); return nil }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tlog-cosign-check: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	logKey := flag.String("log-key", "", "the log's Ed25519 note verifier key")
	var witnesses keys
	flag.Var(&witnesses, "witness-key", "a witness's cosignature/v1 verifier key (repeatable); each must have cosigned")
	flag.Parse()
	if *logKey == "" || len(witnesses) == 0 {
		fail("-log-key and at least one -witness-key are required")
	}
	raw, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		fail("stdin: %v", err)
	}
	logVerifier, err := note.NewVerifier(*logKey)
	if err != nil {
		fail("log key: %v", err)
	}
	verifiers := []note.Verifier{logVerifier}
	for _, w := range witnesses {
		v, err := fnote.NewVerifierForCosignatureV1(w)
		if err != nil {
			fail("witness key %s: %v", w, err)
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(raw, note.VerifierList(verifiers...))
	if err != nil {
		fail("open: %v", err)
	}
	cp, _, _, err := log.ParseCheckpoint(raw, logVerifier.Name(), logVerifier, verifiers[1:]...)
	if err != nil {
		fail("checkpoint: %v", err)
	}
	fmt.Printf("checkpoint %s size %d root %x\n", cp.Origin, cp.Size, cp.Hash)
	for _, v := range verifiers[1:] {
		found := false
		for _, s := range n.Sigs {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				ts, err := fnote.CoSigV1Timestamp(s)
				if err != nil {
					fail("cosignature of %s: %v", s.Name, err)
				}
				fmt.Printf("cosignature/v1 of %s (key %08x) verified, time %s\n", s.Name, s.Hash, ts.UTC().Format("2006-01-02T15:04:05Z"))
				found = true
			}
		}
		if !found {
			fail("no valid cosignature of %s", v.Name())
		}
	}
	fmt.Println("OK")
}
