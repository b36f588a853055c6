// Command protoset writes blockhaul's built-in descriptor set: every .proto
// file the Cosmos SDK and ibc-go publish in their Go modules, compiled with
// protocompile into one FileDescriptorSet (no source info), zstd-compressed.
//
//	make protoset   # cd scripts/protoset && go run . -out ../../chain/cometbft/protodec/builtin.binpb.zst
//
// The modules come through the Go module proxy (go mod download), at the
// versions pinned below. Three imports ship in no module as .proto text:
// gogoproto's, cosmos_proto's and amino's do; google/api/{annotations,http}.proto
// and cosmos/ics23/v1/proofs.proto are taken from the descriptors their Go
// packages register (genproto, ics23), which are generated from those files.
//
// It is a module of its own so that its dependencies stay out of blockhaul's.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	gogoproto "github.com/cosmos/gogoproto/proto"
	_ "github.com/cosmos/ics23/go" // registers cosmos/ics23/v1/proofs.proto
	"github.com/klauspost/compress/zstd"
	_ "google.golang.org/genproto/googleapis/api/annotations" // registers google/api/*.proto
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Modules whose proto/ directories are compiled (roots) or only imported.
var (
	roots = []module{
		{"github.com/cosmos/cosmos-sdk", "v0.53.4", "proto"},
		// v8, not v10: v10's MsgTransfer adds encoding (field 9), which
		// protojson would print as "" on every transfer of every chain.
		{"github.com/cosmos/ibc-go/v8", "v8.8.0", "proto"},
	}
	imports = []module{
		{"github.com/cosmos/cosmos-proto", "v1.0.0-beta.5", "proto"},
		{"github.com/cosmos/gogoproto", "v1.7.0", ""},
	}
)

type module struct{ path, version, sub string }

func (m module) dir() (string, error) {
	out, err := exec.Command("go", "mod", "download", "-json", m.path+"@"+m.version).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", m.path, m.version, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s", m.path, m.version, err, info.Error)
	}
	return filepath.Join(info.Dir, m.sub), nil
}

func main() {
	out := flag.String("out", "builtin.binpb.zst", "file to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "protoset:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	paths, files, err := protoFiles()
	if err != nil {
		return err
	}
	compiled, err := compileProtos(paths, files)
	if err != nil {
		return err
	}
	set := fileSet(compiled)
	// Check the set reads back as the decoder will read it.
	if _, err := protodesc.NewFiles(set); err != nil {
		return fmt.Errorf("the set does not read back: %w", err)
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return err
	}
	z := enc.EncodeAll(raw, nil)
	if err := os.WriteFile(out, z, 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d files (%d compiled), %d bytes, %d compressed\n", len(set.File), len(files), len(raw), len(z))
	_, err = os.Stdout.Write(b.Bytes())
	return err
}

// protoFiles returns the import paths of every module and the .proto files
// of the root modules, relative to their module, sorted.
func protoFiles() (paths, files []string, err error) {
	for _, m := range append(append([]module{}, roots...), imports...) {
		d, err := m.dir()
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, d)
	}
	seen := map[string]bool{}
	for _, root := range paths[:len(roots)] {
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".proto") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if !seen[rel] {
				seen[rel] = true
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	sort.Strings(files)
	return paths, files, nil
}

// compileProtos compiles files over paths; google/api and cosmos/ics23 come
// from the descriptors the Go modules register.
func compileProtos(paths, files []string) (linker.Files, error) {
	registered := func(path string) (protocompile.SearchResult, error) {
		for _, r := range []interface {
			FindFileByPath(string) (protoreflect.FileDescriptor, error)
		}{protoregistry.GlobalFiles, gogoproto.HybridResolver} {
			if fd, err := r.FindFileByPath(path); err == nil {
				return protocompile.SearchResult{Proto: protodesc.ToFileDescriptorProto(fd)}, nil
			}
		}
		return protocompile.SearchResult{}, protoregistry.NotFound
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
			&protocompile.SourceResolver{ImportPaths: paths},
			protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
				if strings.HasPrefix(path, "google/api/") || strings.HasPrefix(path, "cosmos/ics23/") {
					return registered(path)
				}
				return protocompile.SearchResult{}, protoregistry.NotFound
			}),
		}),
	}
	return c.Compile(context.Background(), files...)
}

// fileSet returns every compiled file once, each after its imports.
func fileSet(compiled linker.Files) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	done := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if done[fd.Path()] {
			return
		}
		done[fd.Path()] = true
		imps := fd.Imports()
		for i := 0; i < imps.Len(); i++ {
			add(imps.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range compiled {
		add(fd)
	}
	return set
}
