//go:build !blockhaul_nocloud

package archive

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/blockhaul/blockhaul/internal/testserver"
)

const (
	azuriteAccount = testserver.AzuriteAccount
	azuriteKey     = testserver.AzuriteKey
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
	host := testserver.StartAzurite(t, testserver.Azurite(t))
	base := testserver.AzuriteContainer(t, host, "snapshots")
	ctx := context.Background()
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
