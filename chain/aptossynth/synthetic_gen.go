package aptossynth

import (
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/blockhaul/blockhaul/chain/aptos"
)

// genesisMicros is the synthetic chain's genesis time; blocks follow every
// 250 ms (mainnet's ≈4 blocks a second).
const (
	genesisMicros = 1_665_609_760_857_472
	blockMicros   = 250_000
)

// entryFunctions are the user transactions' entry functions, in about
// mainnet's mix (transfers, DEX swaps, NFT mints, staking, oracles).
var entryFunctions = []string{
	"0x1::aptos_account::transfer",
	"0x1::aptos_account::transfer",
	"0x1::aptos_account::transfer_fungible_assets",
	"0x1::coin::transfer",
	"0x1::primary_fungible_store::transfer",
	"0x190d44266241744264b964a37b8f09863167a12d3e70cda39376cfb4e3561e12::scripts_v2::swap",
	"0x487e905f899ccb6d46fdaec56ba1e0c4cf119862a16c409904b8c78fab1f5e8a::router::swap_exact_input",
	"0x4bf51972879e3b95c4781a5cdcb9e1ee24ef483e7d22f2d903626f126df62bd1::market::place_limit_order",
	"0x1::delegation_pool::add_stake",
	"0x7e783b349d3e89cf5931af376ebeadbfab855b3fa239b7ada8f5a92fbea6b387::pyth::update_price_feeds_with_funder",
}

// Record returns block h's raw record.
func (c *Chain) Record(h uint64) ([]byte, error) {
	if f := c.cfg.Fork; f != nil && h < f.At {
		return nil, fmt.Errorf("aptos: synthetic fork at %d: no block %d", f.At, h)
	}
	g := gen{c: c, h: h}
	first, last := c.Versions(h)
	ts := uint64(genesisMicros) + h*blockMicros
	if h == 0 {
		ts = 0
	}
	hash := c.BlockHash(h)
	b := make([]byte, 0, 2048+int(last-first)*3000)
	b = fmt.Appendf(b, `{"block_height":"%d","block_hash":"0x%x","block_timestamp":"%d","first_version":"%d","last_version":"%d","transactions":[`, h, hash, ts, first, last)
	if h == 0 {
		b = g.genesis(b)
	} else {
		var err error
		if b, err = g.metadata(b, first, ts, hash); err != nil {
			return nil, err
		}
		for i := range c.users(h) {
			b = append(b, ',')
			b = g.user(b, first+1+i, ts, i)
		}
		b = append(b, ',')
		b = g.epilogue(b, last, ts, hash)
	}
	b = append(b, "]}"...)
	var parent *aptos.Parent
	if h > 0 {
		_, plast := c.Versions(h - 1)
		parent = &aptos.Parent{BlockHash: "0x" + hex.EncodeToString(c.parentHash(h)), LastVersion: strconv.FormatUint(plast, 10)}
	}
	return aptos.MarshalRecord(b, nil, parent), nil
}

// gen makes one block's transactions.
type gen struct {
	c *Chain
	h uint64
}

// draw is a deterministic value for (what, i) of the block.
func (g *gen) draw(what string, i uint64) uint64 {
	s := g.c.hash(what, g.h, i)
	return uint64(s[0])<<24 | uint64(s[1])<<16 | uint64(s[2])<<8 | uint64(s[3])
}

func (g *gen) hashHex(what string, i uint64) string {
	return "0x" + hex.EncodeToString(g.c.hash(what, g.h, i))
}

// account is one of 4096 accounts, long form.
func (g *gen) account(n uint64) string {
	s := g.c.hash("account", n%4096, 0)
	return "0x" + hex.EncodeToString(s)
}

func appendCommon(b []byte, version uint64, hash, changeHash, eventRoot, accRoot string, gas uint64, success bool, vmStatus string) []byte {
	b = fmt.Appendf(b, `{"version":"%d","hash":"%s","state_change_hash":"%s","event_root_hash":"%s","state_checkpoint_hash":null,"gas_used":"%d","success":%t,"vm_status":%s,"accumulator_root_hash":"%s"`,
		version, hash, changeHash, eventRoot, gas, success, strconv.Quote(vmStatus), accRoot)
	return b
}

func (g *gen) genesis(b []byte) []byte {
	b = appendCommon(b, 0, g.hashHex("tx", 0), g.hashHex("changes", 0), g.hashHex("events", 0), g.hashHex("acc", 0), 0, true, "Executed successfully")
	b = append(b, `,"changes":[`...)
	b = fmt.Appendf(b, `{"address":"0x1","state_key_hash":"%s","data":{"bytecode":"0xa11ceb0b0700000a0601000203020605081b07232c","abi":{"address":"0x1","name":"chain_id","friends":["0x1::genesis"],"exposed_functions":[{"name":"get","visibility":"public","is_entry":false,"is_view":true,"generic_type_params":[],"params":[],"return":["u8"]}],"structs":[]}},"type":"write_module"},`, g.hashHex("skh", 0))
	b = fmt.Appendf(b, `{"address":"0x1","state_key_hash":"%s","data":{"type":"0x1::chain_id::ChainId","data":{"id":%d}},"type":"write_resource"}`, g.hashHex("skh", 1), g.c.cfg.ChainID)
	b = append(b, `],"payload":{"write_set":{"type":"direct_write_set","changes":[],"events":[]},"type":"write_set_payload"},"events":[`...)
	b = append(b, `{"guid":{"creation_number":"2","account_address":"0x1"},"sequence_number":"0","type":"0x1::reconfiguration::NewEpochEvent","data":{"epoch":"1"}}`...)
	return append(b, `],"type":"genesis_transaction"}`...)
}

func (g *gen) metadata(b []byte, version, ts uint64, blockHash []byte) ([]byte, error) {
	h := g.h
	epoch := 1 + (h-1)/EpochBlocks
	round := (h-1)%EpochBlocks + 1
	proposer := g.account(g.draw("proposer", 0) % 128)
	var votes [13]byte
	copy(votes[:], g.c.hash("votes", h, 0))
	var failed []uint32
	if g.draw("failed-proposer", 0)%50 == 0 {
		failed = []uint32{uint32(g.draw("failed-proposer", 1) % 100)}
	}
	randomness := g.hashHex("randomness", 0)
	tx := aptos.Tx{ID: "0x" + hex.EncodeToString(blockHash), Epoch: strconv.FormatUint(epoch, 10), Round: strconv.FormatUint(round, 10),
		Proposer: proposer, FailedProposerIndices: failed, Timestamp: strconv.FormatUint(ts, 10)}
	tx.Extension = &aptos.MetadataExtension{Type: "v1", Randomness: &randomness}
	for _, v := range votes {
		tx.PreviousBlockVotesBitvec = append(tx.PreviousBlockVotesBitvec, aptos.Uint8Num(v))
	}
	hash, err := aptos.MetadataTxHash(&tx)
	if err != nil {
		return nil, err
	}
	b = appendCommon(b, version, "0x"+hex.EncodeToString(hash), g.hashHex("changes", 0), g.hashHex("events", 0), g.hashHex("acc", 0), 0, true, "Executed successfully")
	b = append(b, `,"changes":[`...)
	b = fmt.Appendf(b, `{"address":"0x1","state_key_hash":"0x5ddf404c60e96e9485beafcabb95609fed8e38e941a725cae4dcec8296fb32d7","data":{"type":"0x1::block::BlockResource","data":{"epoch_interval":"7200000000","height":"%d","new_block_events":{"counter":"%d","guid":{"id":{"addr":"0x1","creation_num":"3"}}},"update_epoch_interval_events":{"counter":"0","guid":{"id":{"addr":"0x1","creation_num":"4"}}}}},"type":"write_resource"},`, h, h+1)
	b = fmt.Appendf(b, `{"address":"0x1","state_key_hash":"0x8048c954221814b04533a9f0a9946c3a8d472ac62df5accb9f47c097e256e8b6","data":{"type":"0x1::stake::ValidatorPerformance","data":{"validators":[{"failed_proposals":"%d","successful_proposals":"%d"}]}},"type":"write_resource"},`, len(failed), round)
	b = fmt.Appendf(b, `{"address":"0x1","state_key_hash":"0x7b1615bf012d3c94223f3f76287ee2f7bdf31d364071128b256aeff0841b626d","data":{"type":"0x1::timestamp::CurrentTimeMicroseconds","data":{"microseconds":"%d"}},"type":"write_resource"},`, ts)
	b = fmt.Appendf(b, `{"address":"0x1","state_key_hash":"0x3c8cf0e8a0ec34a0d8d8d2f4e0e70f2cfc4c24bd4e4a2f0d0b79e6c7ce1d0b9b","data":{"type":"0x1::randomness::PerBlockRandomness","data":{"epoch":"%d","round":"%d","seed":{"vec":["%s"]}}},"type":"write_resource"}`, epoch, round, randomness)
	if epochEnd(h) {
		b = fmt.Appendf(b, `,{"address":"0x1","state_key_hash":"0x2c8f3e4b8f1d0e1a5b6c7d8e9fa0b1c2d3e4f5a6b7c8d9eaf0b1c2d3e4f5a6b7","data":{"type":"0x1::reconfiguration::Configuration","data":{"epoch":"%d","events":{"counter":"%d","guid":{"id":{"addr":"0x1","creation_num":"2"}}},"last_reconfiguration_time":"%d"}},"type":"write_resource"}`, epoch+1, epoch+1, ts)
	}
	b = fmt.Appendf(b, `],"id":"0x%x","epoch":"%d","round":"%d","events":[`, blockHash, epoch, round)
	b = fmt.Appendf(b, `{"guid":{"creation_number":"3","account_address":"0x1"},"sequence_number":"%d","type":"0x1::block::NewBlockEvent","data":{"epoch":"%d","failed_proposer_indices":%s,"hash":"%s","height":"%d","previous_block_votes_bitvec":"0x%x","proposer":"%s","round":"%d","time_microseconds":"%d"}}`,
		h, epoch, u32List(failed), shortAddress(blockHash), h, votes, proposer, round, ts)
	if epochEnd(h) {
		b = fmt.Appendf(b, `,{"guid":{"creation_number":"2","account_address":"0x1"},"sequence_number":"%d","type":"0x1::reconfiguration::NewEpochEvent","data":{"epoch":"%d"}}`, epoch, epoch+1)
	}
	b = append(b, `],"previous_block_votes_bitvec":[`...)
	for i, v := range votes {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	b = fmt.Appendf(b, `],"proposer":"%s","failed_proposer_indices":%s,"timestamp":"%d","block_metadata_extension":{"randomness":"%s","type":"v1"},"type":"block_metadata_transaction"}`,
		proposer, u32List(failed), ts, randomness)
	return b, nil
}

func u32List(xs []uint32) string {
	b := []byte{'['}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	return string(append(b, ']'))
}

// shortAddress is an address as Move values show it: without leading
// zeros.
func shortAddress(a []byte) string {
	s := hex.EncodeToString(a)
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return "0x" + s
}

func (g *gen) user(b []byte, version, ts, i uint64) []byte {
	d := g.draw("user", i)
	sender := g.account(d)
	fn := entryFunctions[(d>>12)%uint64(len(entryFunctions))]
	failed := (d>>20)%100 < FailedUserTxPer100
	vm := "Executed successfully"
	if failed {
		vm = "Move abort in 0x1::fungible_asset: EINSUFFICIENT_BALANCE(0x10004): Insufficient balance in the store."
	}
	gas := 6 + (d>>8)%1500
	nEvents := 2 + (d>>4)%3   // 2..4: mean 3
	nChanges := 5 + (d>>24)%9 // 5..13: mean 9
	if failed {
		nEvents, nChanges = 1, 3 // the fee statement; the sender's account and its gas payment
	}
	b = appendCommon(b, version, g.hashHex("tx", version), g.hashHex("changes", version), g.hashHex("events", version), g.hashHex("acc", version), gas, !failed, vm)
	b = append(b, `,"changes":[`...)
	for j := range nChanges {
		if j > 0 {
			b = append(b, ',')
		}
		skh := g.hashHex("skh", version<<8|j)
		kind := g.draw("change", version<<8|j) % 1000
		switch {
		case j == 1 && !failed:
			b = fmt.Appendf(b, `{"state_key_hash":"%s","handle":"0x1b854694ae746cdbd8d44186ca4929b2b337df21d1c74633be19b2710552fdca","key":"0x0619dc29a0aac8fa146714058e8dd6d2d0f3bdf5f6331907bf91f3acd81e6935","value":"0x%016x","data":null,"type":"write_table_item"}`, skh, 18_000_000_000_000_000+version)
		case kind < 3 && !failed:
			b = fmt.Appendf(b, `{"state_key_hash":"%s","handle":"0x%x","key":"0x%x","data":null,"type":"delete_table_item"}`, skh, g.c.hash("handle", d%64, 0), g.c.hash("key", version, j))
		case kind < 6 && !failed:
			b = fmt.Appendf(b, `{"address":"%s","state_key_hash":"%s","resource":"0x1::fungible_asset::ConcurrentFungibleBalance","type":"delete_resource"}`, sender, skh)
		case kind < 7 && !failed:
			b = fmt.Appendf(b, `{"address":"%s","state_key_hash":"%s","data":{"bytecode":"0xa11ceb0b0700000a06010002030206050807","abi":{"address":"%s","name":"m%d","friends":[],"exposed_functions":[],"structs":[]}},"type":"write_module"}`, sender, skh, sender, version%1000)
		case j == 0:
			b = fmt.Appendf(b, `{"address":"%s","state_key_hash":"%s","data":{"type":"0x1::account::Account","data":{"authentication_key":"%s","coin_register_events":{"counter":"1","guid":{"id":{"addr":"%s","creation_num":"0"}}},"guid_creation_num":"4","key_rotation_events":{"counter":"0","guid":{"id":{"addr":"%s","creation_num":"1"}}},"rotation_capability_offer":{"for":{"vec":[]}},"sequence_number":"%d","signer_capability_offer":{"for":{"vec":[]}}}},"type":"write_resource"}`,
				sender, skh, sender, sender, sender, version/7+1)
		default:
			b = fmt.Appendf(b, `{"address":"0x%x","state_key_hash":"%s","data":{"type":"0x1::fungible_asset::FungibleStore","data":{"balance":"%d","frozen":false,"metadata":{"inner":"0xa"}}},"type":"write_resource"}`,
				g.c.hash("store", d%4096, j), skh, g.draw("balance", version<<8|j)*1000)
		}
	}
	amount := g.draw("amount", version) * 997
	to := g.account(d >> 3)
	b = fmt.Appendf(b, `],"sender":"%s","sequence_number":"%d","max_gas_amount":"200000","gas_unit_price":"100","expiration_timestamp_secs":"%d",`, sender, version/7+1, ts/1_000_000+30)
	b = fmt.Appendf(b, `"payload":{"function":"%s","type_arguments":[],"arguments":["%s","%d"],"type":"entry_function_payload"},`, fn, to, amount)
	if (d>>16)%10 == 0 {
		b = fmt.Appendf(b, `"signature":{"sender":{"public_key":"%s","signature":"0x%x%x","type":"ed25519_signature"},"secondary_signer_addresses":[],"secondary_signers":[],"fee_payer_address":"%s","fee_payer_signer":{"public_key":"%s","signature":"0x%x%x","type":"ed25519_signature"},"type":"fee_payer_signature"},`,
			g.hashHex("pk", version), g.c.hash("sig", version, 0), g.c.hash("sig", version, 1), g.account(d>>5), g.hashHex("pk2", version), g.c.hash("sig2", version, 0), g.c.hash("sig2", version, 1))
	} else {
		b = fmt.Appendf(b, `"signature":{"public_key":"%s","signature":"0x%x%x","type":"ed25519_signature"},`, g.hashHex("pk", version), g.c.hash("sig", version, 0), g.c.hash("sig", version, 1))
	}
	b = append(b, `"replay_protection_nonce":null,"events":[`...)
	for j := range nEvents {
		if j > 0 {
			b = append(b, ',')
		}
		switch {
		case j == nEvents-1:
			b = fmt.Appendf(b, `{"guid":{"creation_number":"0","account_address":"0x0"},"sequence_number":"0","type":"0x1::transaction_fee::FeeStatement","data":{"execution_gas_units":"%d","io_gas_units":"%d","storage_fee_octas":"0","storage_fee_refund_octas":"0","total_charge_gas_units":"%d"}}`, gas/2, gas-gas/2, gas)
		case j == 2:
			// A handle event: the receiver's coin deposit events.
			b = fmt.Appendf(b, `{"guid":{"creation_number":"2","account_address":"%s"},"sequence_number":"%d","type":"0x1::coin::DepositEvent","data":{"amount":"%d"}}`, to, version/11, amount)
		default:
			kind := "Withdraw"
			if j == 1 {
				kind = "Deposit"
			}
			b = fmt.Appendf(b, `{"guid":{"creation_number":"0","account_address":"0x0"},"sequence_number":"0","type":"0x1::fungible_asset::%s","data":{"amount":"%d","store":"0x%x"}}`, kind, amount, g.c.hash("store", d%4096, uint64(j)))
		}
	}
	return fmt.Appendf(b, `],"timestamp":"%d","type":"user_transaction"}`, ts)
}

func (g *gen) epilogue(b []byte, version, ts uint64, blockHash []byte) []byte {
	units := g.draw("units", 0) % 20000
	size := 1000 + g.draw("size", 0)%60000
	hash := aptos.EpilogueTxHash(blockHash, false, false, units, size)
	b = appendCommon(b, version, "0x"+hex.EncodeToString(hash), "0x"+hex.EncodeToString(aptos.EmptyWriteSetHash), "0x"+hex.EncodeToString(aptos.PlaceholderHash), g.hashHex("acc", version), 0, true, "Executed successfully")
	return fmt.Appendf(b, `,"changes":[],"timestamp":"%d","block_end_info":{"block_gas_limit_reached":false,"block_output_limit_reached":false,"block_effective_block_gas_units":%d,"block_approx_output_size":%d},"type":"block_epilogue_transaction"}`, ts, units, size)
}
