// Command witness-add-log registers a log with a litewitness database: what `witnessctl add-log`
// and `witnessctl add-key` of filippo.io/torchwood do, with the same statements over the same
// SQLite driver (zombiezen.com/go/sqlite, a torchwood dependency). witnessctl itself cannot be
// built here: every torchwood release imports sigsum.org/sigsum-go, which the Go module proxy of
// this environment refuses (403, host not on its allowlist). litewitness, the witness, does not
// import it and is built from the module unchanged.
//
//	witness-add-log -db <path> -origin <origin> -key <note verifier key>
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/note"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "witness-add-log: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	db := flag.String("db", "", "litewitness database")
	origin := flag.String("origin", "", "log origin")
	key := flag.String("key", "", "the log's note verifier key")
	flag.Parse()
	if *db == "" || *origin == "" || *key == "" {
		fail("-db, -origin and -key are required")
	}
	// witnessctl checkKeyMatches: the key must parse; its name should be the origin.
	v, err := note.NewVerifier(*key)
	if err != nil {
		fail("verifier key: %v", err)
	}
	if v.Name() != *origin {
		fail("verifier key name %q does not match origin %q", v.Name(), *origin)
	}
	conn, err := sqlite.OpenConn(*db, 0)
	if err != nil {
		fail("opening database: %v", err)
	}
	defer conn.Close()
	// The schema of torchwood's internal/witness OpenDB (litewitness creates it at start).
	if err := sqlitex.ExecScript(conn, `
		PRAGMA strict_types = ON;
		PRAGMA foreign_keys = ON;
		CREATE TABLE IF NOT EXISTS log (
			origin TEXT PRIMARY KEY,
			tree_size INTEGER NOT NULL,
			tree_hash TEXT NOT NULL -- base64-encoded
		);
		CREATE TABLE IF NOT EXISTS key (
			origin TEXT NOT NULL,
			key TEXT NOT NULL, -- note verifier key
			FOREIGN KEY(origin) REFERENCES log(origin)
		);
	`); err != nil {
		fail("schema: %v", err)
	}
	// witnessctl addLog: size 0 with the RFC 6962 root of the empty tree (SHA-256 of nothing).
	empty := sha256.Sum256(nil)
	if err := sqlitex.Execute(conn, "INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)",
		&sqlitex.ExecOptions{Args: []any{*origin, base64.StdEncoding.EncodeToString(empty[:])}}); err != nil {
		fail("adding log: %v", err)
	}
	// witnessctl addKey.
	if err := sqlitex.Execute(conn, "INSERT INTO key (origin, key) VALUES (?, ?)",
		&sqlitex.ExecOptions{Args: []any{*origin, *key}}); err != nil {
		fail("adding key: %v", err)
	}
	fmt.Printf("Added log %q with key %q.\n", *origin, *key)
}
