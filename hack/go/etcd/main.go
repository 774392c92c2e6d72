// Command etcd is the etcd server, built from the Go module proxy: the same entry point as
// etcd's own server/main.go. Module and version: go.mod (pinned from hack/versions.env).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
