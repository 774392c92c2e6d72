// Command tlog-tiles-check is an independent c2sp.org/tlog-tiles client for the tests: torchwood's
// tile client (filippo.io/torchwood TileFetcher and Client, over golang.org/x/mod/sumdb/tlog and
// note), not this project's code. It fetches <url>/checkpoint, verifies the log's note signature
// with -log-key, then for every "<index> <base64 entry>" line on stdin fetches the entry bundle and
// the hash tiles it needs, checks the entry's inclusion in the checkpoint's tree, and that the
// entry served is the one expected. Exit status 1 on any failure, with the reason on stderr.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
)

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tlog-tiles-check: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	url := flag.String("url", "", "tlog-tiles prefix, e.g. http://host/v1/tlog/vault")
	token := flag.String("token", "", "bearer token for the requests (optional)")
	logKey := flag.String("log-key", "", "the log's Ed25519 note verifier key")
	flag.Parse()
	if *url == "" || *logKey == "" {
		fail("-url and -log-key are required")
	}
	verifier, err := note.NewVerifier(*logKey)
	if err != nil {
		fail("log key: %v", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: bearer{*token, http.DefaultTransport}}
	fetcher, err := torchwood.NewTileFetcher(*url, torchwood.WithHTTPClient(hc))
	if err != nil {
		fail("tile fetcher: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := fetcher.ReadEndpoint(ctx, "checkpoint")
	if err != nil {
		fail("checkpoint: %v", err)
	}
	n, err := note.Open(raw, note.VerifierList(verifier))
	if err != nil {
		fail("checkpoint signature: %v", err)
	}
	cp, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil {
		fail("checkpoint: %v", err)
	}
	if cp.Origin != verifier.Name() {
		fail("checkpoint origin %q is not the log key's name %q", cp.Origin, verifier.Name())
	}
	fmt.Printf("checkpoint %s size %d root %s (log signature verified, %d other signature lines)\n",
		cp.Origin, cp.N, base64.StdEncoding.EncodeToString(cp.Hash[:]), len(n.UnverifiedSigs))
	client, err := torchwood.NewClient(fetcher)
	if err != nil {
		fail("client: %v", err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	count := 0
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		idx, b64, ok := strings.Cut(line, " ")
		index, err1 := strconv.ParseInt(idx, 10, 64)
		want, err2 := base64.StdEncoding.DecodeString(b64)
		if !ok || err1 != nil || err2 != nil {
			fail("input line %q: want <index> <base64 entry>", line)
		}
		entry, proof, err := client.Entry(ctx, cp.Tree, index)
		if err != nil {
			fail("entry %d: %v", index, err)
		}
		if !bytes.Equal(entry, want) {
			fail("entry %d: the log serves other bytes than expected", index)
		}
		fmt.Printf("entry %d included in tree %d (proof of %d hashes)\n", index, cp.N, len(proof))
		count++
	}
	if err := in.Err(); err != nil {
		fail("stdin: %v", err)
	}
	fmt.Printf("OK %d entries verified against the tiles of %s\n", count, cp.Origin)
}
