//go:build !blockhaul_nocloud

package testserver

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

// Azurite's well-known development account (the emulator's documented
// default, not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is the Azurite binary of make test (scripts/azurite.sh), as
// Binary gives it.
func Azurite(t testing.TB) string {
	t.Helper()
	return Binary(t, "BLOCKHAUL_TEST_AZURITE", "Azurite", "scripts/azurite.sh")
}

// StartAzurite runs azurite-blob on a free port of 127.0.0.1 with its data
// in a temporary directory, and returns host:port once it says it listens.
// It is stopped when the test ends.
func StartAzurite(t *testing.T, bin string) string {
	t.Helper()
	port := FreePorts(t, 1)[0]
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port),
		"--location", t.TempDir(), "--skipApiVersionCheck", "--disableProductStyleUrl", "--silent")
	// Azurite closes its server on an interrupt, which waits for the
	// clients' idle keep-alive connections: a few seconds, then kill.
	Start(t, cmd, "azurite", "successfully listens on", 60*time.Second, 3*time.Second)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// AzuriteContainer creates container name on the Azurite at host, sets
// the account's keys in the test's environment (gocloud's azureblob reads
// them) and returns the azblob:// URL of the container.
func AzuriteContainer(t *testing.T, host, name string) string {
	t.Helper()
	t.Setenv("AZURE_STORAGE_ACCOUNT", AzuriteAccount)
	t.Setenv("AZURE_STORAGE_KEY", AzuriteKey)
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential("http://"+host+"/"+AzuriteAccount, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateContainer(context.Background(), name, nil); err != nil {
		t.Fatalf("create the container: %v", err)
	}
	return "azblob://" + name + "?protocol=http&localemu=true&domain=" + host
}
