//go:build !blockhaul_nocloud

package archive

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/blockhaul/blockhaul/internal/testserver"
)

// Azurite's well-known development account (the emulator's documented
// default, not a secret).
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// TestSnapshotThroughAzurite snapshots to and restores from the Azure Blob
// Storage API: Azurite, Microsoft's emulator, started by the test on
// 127.0.0.1, through gocloud.dev's azureblob driver and the Azure SDK,
// every request signed with the account's shared key and checked. A byte
// flipped in one blob is refused by restore, by name; a wrong key is
// refused by the server.
//
// make test installs Azurite from the npm registry (scripts/azurite.sh) and
// names it in BLOCKHAUL_TEST_AZURITE; a plain go test without it skips,
// saying so, and fails under CI=true. When the variable is set, the server must start and the round
// trip pass.
func TestSnapshotThroughAzurite(t *testing.T) {
	bin := testserver.Binary(t, "BLOCKHAUL_TEST_AZURITE", "Azurite", "scripts/azurite.sh")
	host := startAzurite(t, bin)
	t.Setenv("AZURE_STORAGE_ACCOUNT", azuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", azuriteKey)
	ctx := context.Background()
	cred, err := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential("http://"+host+"/"+azuriteAccount, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateContainer(ctx, "snapshots", nil); err != nil {
		t.Fatalf("create the container: %v", err)
	}
	base := "azblob://snapshots?protocol=http&localemu=true&domain=" + host
	url := base + "&prefix=chain-a/"
	bucket := roundTrip(t, url, families()[0], "Azurite")
	refusesTampered(t, bucket, url, base, "chain-a/", "Azurite")

	// The server checks the signature: another key is refused.
	other, err := azblob.NewSharedKeyCredential(azuriteAccount, strings.Repeat("A", len(azuriteKey)-2)+"==")
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := azblob.NewClientWithSharedKeyCredential("http://"+host+"/"+azuriteAccount, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.ServiceClient().NewContainerClient("snapshots").GetProperties(ctx, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Azurite, asked with the wrong key: %v; want 403", err)
	}
}

// startAzurite runs azurite-blob on a free port of 127.0.0.1 with its data
// in a temporary directory, and returns host:port once it says it listens.
// It is stopped when the test ends.
func startAzurite(t *testing.T, bin string) string {
	t.Helper()
	port := testserver.FreePorts(t, 1)[0]
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port),
		"--location", t.TempDir(), "--skipApiVersionCheck", "--disableProductStyleUrl", "--silent")
	// Azurite closes its server on an interrupt, which waits for the
	// clients' idle keep-alive connections: a few seconds, then kill.
	testserver.Start(t, cmd, "azurite", "successfully listens on", 60*time.Second, 3*time.Second)
	return fmt.Sprintf("127.0.0.1:%d", port)
}
