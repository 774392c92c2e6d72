// Command timestamp-server is the Sigstore timestamp authority (RFC 3161), built from the Go
// module proxy: upstream's API, signers and HTTP server (pkg/server.NewRestAPIServer), started
// the way cmd/timestamp-server's `serve` does, minus two things a local test stack cannot have.
// Upstream `serve` always opens a Prometheus listener on the fixed address :2112 and exits when
// that port is taken, so a second stack on the same machine would lose its TSA; and it polls
// public NTP servers, which are unreachable offline. Module and version: go.mod (pinned from
// hack/versions.env).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/sigstore/timestamp-authority/v2/pkg/log"
	"github.com/sigstore/timestamp-authority/v2/pkg/server"
	"github.com/spf13/viper"
)

const module = "github.com/sigstore/timestamp-authority/v2"

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on")
	signer := flag.String("timestamp-signer", "file", "signer: file or memory (kms and tink need a cloud)")
	key := flag.String("file-signer-key-path", "", "PEM private key of the file signer")
	chain := flag.String("certificate-chain-path", "", "PEM chain of the signer: leaf, intermediates, root")
	includeChain := flag.Bool("include-chain-in-response", true, "answer certReq with the whole chain")
	version := flag.Bool("version", false, "print the upstream module version and exit")
	flag.Parse()
	if *version {
		fmt.Printf("timestamp-server %s\n", upstreamVersion())
		return
	}
	// The settings upstream's root command binds from its flags; the API reads them from viper.
	viper.Set("timestamp-signer", *signer)
	viper.Set("timestamp-signer-hash", "sha256")
	viper.Set("file-signer-key-path", *key)
	viper.Set("certificate-chain-path", *chain)
	viper.Set("include-chain-in-response", *includeChain)
	viper.Set("enforce-intermediate-eku", true)
	viper.Set("max-request-body-size", uint64(1<<20))
	viper.Set("default-policy-oid", "1.3.6.1.4.1.57264.2")
	viper.Set("accepted-policy-oids", []string{"1.3.6.1.4.1.57264.2"})
	log.ConfigureLogger("prod")
	log.Logger.Infof("starting timestamp-server %s", upstreamVersion())
	srv := server.NewRestAPIServer(*host, *port, []string{"http"}, false, 30*time.Second, 30*time.Second)
	srv.CleanupTimeout = 10 * time.Second
	defer func() { _ = srv.Shutdown() }()
	if err := srv.Serve(); err != nil {
		log.Logger.Error(err)
		os.Exit(1)
	}
}

func upstreamVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				return dep.Version
			}
		}
	}
	return "unknown"
}
