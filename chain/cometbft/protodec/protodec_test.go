package protodec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/blockhaul/blockhaul/internal/gomodule"
)

// Wire helpers: the messages below are written field by field from the
// .proto definitions, so that the expected JSON is checked by hand rather
// than by the code under test.
func str(b []byte, n protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func msg(b []byte, n protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func varint(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func anyOf(typeURL string, value []byte) []byte { return msg(str(nil, 1, typeURL), 2, value) }

func coin(denom, amount string) []byte { return str(str(nil, 1, denom), 2, amount) }

func decodeJSON(t *testing.T, s *Set, typeURL string, value []byte) (map[string]any, string) {
	t.Helper()
	js, signer, err := s.AppendJSON([]byte("prefix"), typeURL, value)
	if err != nil {
		t.Fatalf("%s: %v", typeURL, err)
	}
	if !strings.HasPrefix(string(js), "prefix") {
		t.Fatalf("%s: dst not appended to: %q", typeURL, js)
	}
	var m map[string]any
	if err := json.Unmarshal(js[len("prefix"):], &m); err != nil {
		t.Fatalf("%s: %s: %v", typeURL, js, err)
	}
	return m, signer
}

func same(t *testing.T, what string, got map[string]any, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("%s:\n got %s\nwant %s", what, g, want)
	}
}

// TestBuiltinGaps decodes the message types the hand-written reader left
// NULL, nested Any values included, against JSON written by hand from
// their .proto files.
func TestBuiltinGaps(t *testing.T) {
	s, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if s.Types() < 1000 {
		t.Errorf("built-in set has %d message types", s.Types())
	}
	const addr, val = "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu", "cosmosvaloper1qdxnjmhzndcc63yejwgk5mhf6y7npds9a7zpa0"

	text := str(str(nil, 1, "Title"), 2, "Body")
	v1beta1 := msg(msg(msg(nil, 1, anyOf("/cosmos.gov.v1beta1.TextProposal", text)), 2, coin("uatom", "1000")), 3, []byte(addr))
	got, signer := decodeJSON(t, s, "/cosmos.gov.v1beta1.MsgSubmitProposal", v1beta1)
	same(t, "gov v1beta1 MsgSubmitProposal", got, `{"content":{"@type":"/cosmos.gov.v1beta1.TextProposal","title":"Title","description":"Body"},
		"initial_deposit":[{"denom":"uatom","amount":"1000"}],"proposer":"`+addr+`"}`)
	if signer != addr {
		t.Errorf("MsgSubmitProposal signer %q", signer)
	}

	send := msg(str(str(nil, 1, "gov"), 2, addr), 3, coin("uatom", "5"))
	v1 := msg(nil, 1, anyOf("/cosmos.bank.v1beta1.MsgSend", send))
	v1 = msg(v1, 2, coin("uatom", "10"))
	v1 = str(v1, 3, addr)
	v1 = str(v1, 4, "ipfs://x")
	v1 = str(v1, 5, "T")
	v1 = str(v1, 6, "S")
	v1 = varint(v1, 7, 1)
	got, _ = decodeJSON(t, s, "/cosmos.gov.v1.MsgSubmitProposal", v1)
	same(t, "gov v1 MsgSubmitProposal", got, `{"messages":[{"@type":"/cosmos.bank.v1beta1.MsgSend","from_address":"gov","to_address":"`+addr+`","amount":[{"denom":"uatom","amount":"5"}]}],
		"initial_deposit":[{"denom":"uatom","amount":"10"}],"proposer":"`+addr+`","metadata":"ipfs://x","title":"T","summary":"S","expedited":true}`)

	key := make([]byte, 32)
	key[0] = 7
	desc := str(str(str(str(str(nil, 1, "moniker"), 2, "id"), 3, "https://x"), 4, "sec"), 5, "details")
	rates := str(str(str(nil, 1, "100000000000000000"), 2, "200000000000000000"), 3, "10000000000000000")
	cv := msg(nil, 1, desc)
	cv = msg(cv, 2, rates)
	cv = str(cv, 3, "1")
	cv = str(cv, 4, addr)
	cv = str(cv, 5, val)
	cv = msg(cv, 6, anyOf("/cosmos.crypto.ed25519.PubKey", msg(nil, 1, key)))
	cv = msg(cv, 7, coin("uatom", "1"))
	got, signer = decodeJSON(t, s, "/cosmos.staking.v1beta1.MsgCreateValidator", cv)
	same(t, "MsgCreateValidator", got, `{"description":{"moniker":"moniker","identity":"id","website":"https://x","security_contact":"sec","details":"details"},
		"commission":{"rate":"100000000000000000","max_rate":"200000000000000000","max_change_rate":"10000000000000000"},
		"min_self_delegation":"1","delegator_address":"`+addr+`","validator_address":"`+val+`",
		"pubkey":{"@type":"/cosmos.crypto.ed25519.PubKey","key":"BwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="},"value":{"denom":"uatom","amount":"1"}}`)
	if signer != val {
		t.Errorf("MsgCreateValidator signer %q, want the validator address", signer)
	}

	ev := msg(nil, 1, str(nil, 1, "new"))
	ev = str(ev, 2, val)
	got, _ = decodeJSON(t, s, "/cosmos.staking.v1beta1.MsgEditValidator", ev)
	same(t, "MsgEditValidator", got, `{"description":{"moniker":"new","identity":"","website":"","security_contact":"","details":""},
		"validator_address":"`+val+`","commission_rate":"","min_self_delegation":""}`)

	fund := msg(nil, 1, coin("uatom", "7"))
	fund = str(fund, 2, addr)
	got, signer = decodeJSON(t, s, "/cosmos.distribution.v1beta1.MsgFundCommunityPool", fund)
	same(t, "MsgFundCommunityPool", got, `{"amount":[{"denom":"uatom","amount":"7"}],"depositor":"`+addr+`"}`)
	if signer != addr {
		t.Errorf("MsgFundCommunityPool signer %q", signer)
	}

	vw := varint(nil, 1, 42)
	vw = str(vw, 2, addr)
	vw = msg(vw, 3, str(varint(nil, 1, 1), 2, "700000000000000000"))
	vw = msg(vw, 3, str(varint(nil, 1, 3), 2, "300000000000000000"))
	got, _ = decodeJSON(t, s, "/cosmos.gov.v1.MsgVoteWeighted", vw)
	same(t, "gov v1 MsgVoteWeighted", got, `{"proposal_id":"42","voter":"`+addr+`","metadata":"",
		"options":[{"option":"VOTE_OPTION_YES","weight":"700000000000000000"},{"option":"VOTE_OPTION_NO","weight":"300000000000000000"}]}`)

	// MsgMultiSend names its signer in its first input.
	ms := msg(nil, 1, msg(str(nil, 1, addr), 2, coin("uatom", "3")))
	ms = msg(ms, 2, msg(str(nil, 1, "cosmos1other"), 2, coin("uatom", "3")))
	if _, signer = decodeJSON(t, s, "/cosmos.bank.v1beta1.MsgMultiSend", ms); signer != addr {
		t.Errorf("MsgMultiSend signer %q", signer)
	}
}

// TestMalformed: named errors, dst unchanged.
func TestMalformed(t *testing.T) {
	s := MustBuiltin()
	send := str(str(nil, 1, "a"), 2, "b")
	for _, c := range []struct {
		name, typeURL string
		value         []byte
		want          error
	}{
		{"unknown type", "/akash.market.v1beta4.MsgCreateLease", send, ErrUnknownType},
		{"truncated", "/cosmos.bank.v1beta1.MsgSend", send[:len(send)-1], ErrMalformed},
		{"wrong wire type", "/cosmos.bank.v1beta1.MsgSend", varint(nil, 1, 1), ErrMalformed},
		{"wrong wire type, nested", "/cosmos.bank.v1beta1.MsgSend", msg(nil, 3, varint(nil, 1, 5)), ErrMalformed},
		{"nested Any of an unknown type", "/cosmos.gov.v1.MsgSubmitProposal", msg(nil, 1, anyOf("/x.y.Unknown", nil)), ErrMalformed},
		{"invalid UTF-8", "/cosmos.bank.v1beta1.MsgSend", str(nil, 1, "\xff"), ErrMalformed},
	} {
		js, _, err := s.AppendJSON([]byte("x"), c.typeURL, c.value)
		if !errors.Is(err, c.want) || string(js) != "x" || !strings.Contains(err.Error(), c.typeURL) {
			t.Errorf("%s: %q, %v; want %v naming the type", c.name, js, err, c.want)
		}
	}
	// An unknown field number is a newer version of the type, not an error.
	if _, _, err := s.AppendJSON(nil, "/cosmos.bank.v1beta1.MsgSend", str(send, 99, "new")); err != nil {
		t.Errorf("unknown field: %v", err)
	}
	// NUL, which jsonb refuses, is replaced as blockhaul's text is.
	js, _, err := s.AppendJSON(nil, "/cosmos.bank.v1beta1.MsgSend", str(nil, 1, "a\x00b\\u0000"))
	var got struct {
		FromAddress string `json:"from_address"`
	}
	if err != nil || strings.Contains(strings.ReplaceAll(string(js), `\\u0000`, ""), `\u0000`) ||
		json.Unmarshal(js, &got) != nil || got.FromAddress != "a\uFFFDb\\u0000" {
		t.Errorf("NUL: %s %v", js, err)
	}
}

// akashLease is a MsgCreateLease of Akash's market v1beta4, written from
// akash/market/v1beta4/{lease,bid}.proto.
func akashLease() ([]byte, string) {
	const owner, provider = "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63", "akash1q7spv2cw06yszgfp4f9ed59lkka6ytn8g4tkjf"
	id := str(varint(varint(varint(str(nil, 1, owner), 2, 12345678), 3, 1), 4, 1), 5, provider)
	return msg(nil, 1, id), `{"bid_id":{"owner":"` + owner + `","dseq":"12345678","gseq":1,"oseq":1,"provider":"` + provider + `"}}`
}

// akashProtos is the directory of Akash's published proto files that
// TestAkashProtos reads: the base, deployment v1beta3, escrow v1beta3 and
// market v1beta4 packages of github.com/akash-network/akash-api v0.0.82
// (proto/node; Apache-2.0), fetched through the Go module proxy.
func akashProtos(t *testing.T) string {
	return gomodule.Files(t, "github.com/akash-network/akash-api", "v0.0.82", "proto/node",
		"akash/base/v1beta3", "akash/deployment/v1beta3", "akash/escrow/v1beta3", "akash/market/v1beta4")
}

// TestAkashProtos adds Akash's published proto files (akashProtos) by
// directory and as a compiled descriptor set, and decodes Akash messages
// with both.
func TestAkashProtos(t *testing.T) {
	ctx := context.Background()
	dir := akashProtos(t)
	s, err := Load(ctx, Options{ProtoDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Added() != 30 || !s.Known("/cosmos.bank.v1beta1.MsgSend") || !s.Known("/akash.deployment.v1beta3.MsgCreateDeployment") {
		t.Fatalf("added %d files; MsgSend known %v", s.Added(), s.Known("/cosmos.bank.v1beta1.MsgSend"))
	}
	lease, want := akashLease()
	got, _ := decodeJSON(t, s, "/akash.market.v1beta4.MsgCreateLease", lease)
	same(t, "MsgCreateLease", got, want)

	// A deployment with a deposit: the SDK's Coin from the built-in set.
	dep := msg(nil, 1, varint(str(nil, 1, "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63"), 2, 9))
	dep = msg(dep, 3, []byte{0xab})
	dep = msg(dep, 4, coin("uakt", "5000000"))
	dep = str(dep, 5, "akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63")
	got, _ = decodeJSON(t, s, "/akash.deployment.v1beta3.MsgCreateDeployment", dep)
	same(t, "MsgCreateDeployment", got, `{"id":{"owner":"akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63","dseq":"9"},"groups":[],"version":"qw==",
		"deposit":{"denom":"uakt","amount":"5000000"},"depositor":"akash1365yvmc4s7awdyj3n2sav7xfx76adc6dnmlx63"}`)

	// The same files as a compiled descriptor set without their imports
	// (as protoc --descriptor_set_out writes it): imports resolve in the
	// built-in set.
	files := []string{}
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".proto") {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	base := MustBuiltin()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
		&protocompile.SourceResolver{ImportPaths: []string{dir}},
		protocompile.ResolverFunc(func(p string) (protocompile.SearchResult, error) {
			fd, err := base.files.FindFileByPath(p)
			return protocompile.SearchResult{Desc: fd}, err
		}),
	})}
	res, err := c.Compile(ctx, files...)
	if err != nil {
		t.Fatal(err)
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, f := range res {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	raw, _ := proto.Marshal(set)
	path := filepath.Join(t.TempDir(), "akash.binpb")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Load(ctx, Options{DescriptorSets: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = decodeJSON(t, s2, "/akash.market.v1beta4.MsgCreateLease", lease)
	same(t, "MsgCreateLease from a descriptor set", got, want)

	// A set missing one of its own files names the import.
	set.File = set.File[1:]
	raw, _ = proto.Marshal(set)
	os.WriteFile(path, raw, 0o644)
	if _, err := Load(ctx, Options{DescriptorSets: []string{path}}); !errors.Is(err, ErrDescriptorSet) || !strings.Contains(err.Error(), res[0].Path()) {
		t.Errorf("set missing %s: %v", res[0].Path(), err)
	}
}

// TestLoadErrors: proto files that do not compile, a missing import, a file
// that is not a descriptor set: named errors.
func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	write := func(name, text string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	syntax := write("bad.proto", "syntax = \"proto3\";\npackage x;\nmessage M { string a = ; }\n")
	missing := write("m.proto", "syntax = \"proto3\";\npackage x;\nimport \"nowhere/gone.proto\";\nmessage M { string a = 1; }\n")
	notSet := filepath.Join(write("x", ""), "x")
	os.WriteFile(notSet, []byte("\xff\xff\xff"), 0o644)
	// A set that does not link: a field of a type no file declares.
	unlinked := filepath.Join(write("x", ""), "unlinked.binpb")
	raw, _ := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{{
		Name: proto.String("x/bad.proto"), Package: proto.String("x"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M"), Field: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("a"), Number: proto.Int32(1), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".x.Missing")}}}},
	}}})
	os.WriteFile(unlinked, raw, 0o644)
	for _, c := range []struct {
		name  string
		opts  Options
		want  error
		names string
	}{
		{"syntax error", Options{ProtoDirs: []string{syntax}}, ErrCompile, "bad.proto:3"},
		{"missing import", Options{ProtoDirs: []string{missing}}, ErrCompile, "nowhere/gone.proto"},
		{"no such directory", Options{ProtoDirs: []string{filepath.Join(syntax, "none")}}, ErrProtoDir, "none: no such file or directory"},
		{"a file, not a directory", Options{ProtoDirs: []string{notSet}}, ErrProtoDir, "x: not a directory"},
		{"empty directory", Options{ProtoDirs: []string{t.TempDir()}}, ErrCompile, "no .proto files"},
		{"not a descriptor set", Options{DescriptorSets: []string{notSet}}, ErrDescriptorSet, notSet},
		{"no such file", Options{DescriptorSets: []string{notSet + ".none"}}, ErrDescriptorSet, ".none"},
		{"a set that does not link", Options{DescriptorSets: []string{unlinked}}, ErrDescriptorSet, "unlinked.binpb: x/bad.proto: "},
	} {
		_, err := Load(ctx, c.opts)
		// A directory that is not there was reported as files that do
		// not compile.
		if c.want == ErrProtoDir && (errors.Is(err, ErrCompile) || strings.Contains(fmt.Sprint(err), "compile")) {
			t.Errorf("%s: %v; nothing was compiled", c.name, err)
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("%s: %v; want %v naming %q", c.name, err, c.want, c.names)
		}
	}
	// protobuf's own words follow the file (their spacing varies between
	// builds, on purpose); they name the type that is missing.
	if _, err := Load(ctx, Options{DescriptorSets: []string{unlinked}}); err == nil || !strings.Contains(err.Error(), `"x.Missing"`) {
		t.Errorf("a set that does not link: %v; want the missing type named", err)
	}
}

// BenchmarkAppendJSON decodes a MsgSend and a MsgTransfer.
func BenchmarkAppendJSON(b *testing.B) {
	s := MustBuiltin()
	send := msg(str(str(nil, 1, "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu"), 2, "cosmos1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5lzv7xu"), 3, coin("uatom", "5000"))
	var js []byte
	b.ReportAllocs()
	for b.Loop() {
		js, _, _ = s.AppendJSON(js[:0], "/cosmos.bank.v1beta1.MsgSend", send)
	}
}

// TestRequiredFields: a message that can hold a required field (proto2),
// directly or in a message within it, is refused when one is unset and
// decoded when it is set, though messages without any skip the check.
func TestRequiredFields(t *testing.T) {
	dir := t.TempDir()
	const src = `syntax = "proto2";
package req;
message Inner { required string name = 1; }
message Outer { optional string note = 1; optional Inner inner = 2; }
message Loop { optional Loop next = 1; optional Outer outer = 2; }
message Free { optional string note = 1; optional Free next = 2; }
`
	if err := os.WriteFile(filepath.Join(dir, "req.proto"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(context.Background(), Options{ProtoDirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	inner := str(nil, 1, "n")
	for _, c := range []struct {
		typeURL string
		value   []byte
		ok      bool
		want    string
	}{
		{"/req.Outer", msg(str(nil, 1, "x"), 2, inner), true, `{"note":"x","inner":{"name":"n"}}`},
		{"/req.Outer", msg(str(nil, 1, "x"), 2, nil), false, ""},             // inner's name unset
		{"/req.Loop", msg(nil, 1, msg(nil, 2, msg(nil, 2, nil))), false, ""}, // deep in a cycle
		{"/req.Loop", msg(nil, 1, msg(nil, 2, msg(nil, 2, inner))), true, `{"next":{"outer":{"inner":{"name":"n"}}}}`},
		{"/req.Free", msg(str(nil, 1, "a"), 2, str(nil, 1, "b")), true, `{"note":"a","next":{"note":"b"}}`},
	} {
		js, _, err := s.AppendJSON(nil, c.typeURL, c.value)
		if !c.ok {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s %x: %q, %v; want ErrMalformed", c.typeURL, c.value, js, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %x: %v", c.typeURL, c.value, err)
			continue
		}
		var got, want any
		if json.Unmarshal(js, &got) != nil || json.Unmarshal([]byte(c.want), &want) != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s %x: %s, want %s", c.typeURL, c.value, js, c.want)
		}
	}
}
