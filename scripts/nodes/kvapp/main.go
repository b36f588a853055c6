// Command kvapp runs CometBFT's kvstore example application as a socket ABCI server with the two
// switches the built-in persistent_kvstore leaves off: block-level events in FinalizeBlock and a
// retain height, so a node in front of it prunes old blocks and answers "not available".
package main

import (
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/cometbft/cometbft/abci/example/kvstore"
	"github.com/cometbft/cometbft/abci/server"
)

func main() {
	addr := flag.String("addr", "tcp://127.0.0.1:26658", "ABCI socket address")
	dir := flag.String("dir", "", "directory of the application's database (empty: in memory)")
	retain := flag.Int64("retain-blocks", 0, "blocks the node keeps after each commit (0: all)")
	flag.Parse()

	var app *kvstore.Application
	if *dir == "" {
		app = kvstore.NewInMemoryApplication()
	} else {
		app = kvstore.NewPersistentApplication(*dir)
	}
	app.SetGenBlockEvents()
	app.RetainBlocks = *retain

	srv, err := server.NewServer(*addr, "socket", app)
	if err != nil {
		log.Fatalf("kvapp: %v", err)
	}
	if err := srv.Start(); err != nil {
		log.Fatalf("kvapp: start %s: %v", *addr, err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if err := srv.Stop(); err != nil {
		log.Fatalf("kvapp: stop: %v", err)
	}
}
