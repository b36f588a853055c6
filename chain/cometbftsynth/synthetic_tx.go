package cometbftsynth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/blockhaul/blockhaul/chain/cometbft"
)

// Transactions of the synthetic chain are protobuf-encoded Cosmos SDK
// TxRaw messages (body, auth info, signature) of realistic content and
// size, and their results carry the events the SDK 0.50 modules emit for
// them. Nothing decodes the tx bytes; they are there to be stored, hashed
// and compressed like a real chain's.

// txContent is what one tx says, drawn once and used both for its bytes
// and for its events, so that the two agree.
type txContent struct {
	plan                                 txPlan
	sender, recipient                    int // account indexes
	route, remote                        int // ibcRoutes index, remote account index
	vals                                 [3]int
	amount, fee, gasWanted, gasUsed, seq uint64
	packetSeq, timeout, clientHeight     uint64
	proposal                             uint64
	memo                                 uint64 // exchange deposit memo, 0 for none
	failCode                             uint32
	sig                                  [64]byte
	pubkey                               [33]byte
}

// ibcRoute is one of the synthetic chain's IBC channels.
type ibcRoute struct {
	channel, counterChannel string // this chain's end, the remote end
	connection, client      string
	prefix                  string // bech32 prefix of the remote chain
	remoteDenom             string // the remote chain's staking denom
	escrow                  string // ICS-20 escrow account of the channel
	voucher                 string // denom of the remote token on this chain
}

var ibcRoutes = func() []ibcRoute {
	routes := []ibcRoute{
		{channel: "channel-141", counterChannel: "channel-0", connection: "connection-257", client: "07-tendermint-259", prefix: "osmo", remoteDenom: "uosmo"},
		{channel: "channel-569", counterChannel: "channel-1", connection: "connection-809", client: "07-tendermint-1119", prefix: "neutron", remoteDenom: "untrn"},
		{channel: "channel-391", counterChannel: "channel-0", connection: "connection-635", client: "07-tendermint-913", prefix: "stride", remoteDenom: "ustrd"},
		{channel: "channel-536", counterChannel: "channel-4", connection: "connection-786", client: "07-tendermint-1066", prefix: "noble", remoteDenom: "uusdc"},
	}
	for i := range routes {
		r := &routes[i]
		// Escrow address: SHA-256 of version, NUL, port/channel (ICS-20).
		sum := sha256.Sum256([]byte("ics20-1\x00transfer/" + r.channel))
		r.escrow = cometbft.Bech32Encode("cosmos", sum[:20])
		// Voucher denom: ibc/ + SHA-256 of the denom trace.
		sum = sha256.Sum256([]byte("transfer/" + r.channel + "/" + r.remoteDenom))
		r.voucher = "ibc/" + strings.ToUpper(hex.EncodeToString(sum[:]))
	}
	return routes
}()

// Message type URLs, by kind (relay has two messages).
var msgTypes = [...][2]string{
	kindSend:        {"/cosmos.bank.v1beta1.MsgSend"},
	kindIBCTransfer: {"/ibc.applications.transfer.v1.MsgTransfer"},
	kindWithdraw:    {"/cosmos.distribution.v1beta1.MsgWithdrawDelegatorReward"},
	kindDelegate:    {"/cosmos.staking.v1beta1.MsgDelegate"},
	kindRelay:       {"/ibc.core.client.v1.MsgUpdateClient", "/ibc.core.channel.v1.MsgRecvPacket"},
	kindVote:        {"/cosmos.gov.v1beta1.MsgVote"},
}

// msgResponses[kind][msgs-1] is the base64 TxMsgData a successful tx
// returns: one Any per message, named after the message's response type.
var msgResponses = func() (out [len(msgTypes)][3]string) {
	for kind, types := range msgTypes {
		for n := 1; n <= 3; n++ {
			var data []byte
			for i := range n {
				t := types[0]
				if types[1] != "" {
					t = types[min(i, 1)]
				}
				data = pbBytes(data, 2, pbString(nil, 1, t+"Response"))
			}
			out[kind][n-1] = base64.StdEncoding.EncodeToString(data)
		}
	}
	return out
}()

// drawContent draws the content of every tx of the plan.
func (g *generator) drawContent() {
	s := g.s
	g.content = g.content[:0]
	for _, t := range g.plan.txs {
		c := txContent{
			plan:      t,
			sender:    g.r.intn(len(s.accounts)),
			recipient: g.r.intn(len(s.accounts)),
			route:     g.r.intn(len(ibcRoutes)),
			remote:    g.r.intn(256),
			seq:       g.r.between(0, 40_000),
		}
		for i := range c.vals {
			c.vals[i] = g.r.intn(len(s.vals))
		}
		switch g.r.intn(4) {
		case 0:
			c.amount = g.r.between(1, 1_000)
		case 1:
			c.amount = g.r.between(1_000, 1_000_000)
		default:
			c.amount = g.r.between(1_000_000, 5_000_000_000)
		}
		switch t.kind {
		case kindRelay:
			c.gasWanted = g.r.between(250_000, 600_000)
		case kindWithdraw:
			c.gasWanted = g.r.between(120_000, 180_000) * uint64(t.msgs)
		default:
			c.gasWanted = g.r.between(80_000, 250_000)
		}
		c.gasUsed = c.gasWanted * g.r.between(55, 95) / 100
		c.fee = c.gasWanted * 25 / 10_000
		if g.r.chance(0.15) {
			c.memo = g.r.between(100_000, 999_999_999)
		}
		c.packetSeq = g.r.between(1, 3_000_000)
		c.timeout = 1_700_000_000_000_000_000 + g.r.next()%100_000_000_000_000_000
		c.clientHeight = g.r.between(1_000_000, 20_000_000)
		c.proposal = g.r.between(800, 950)
		if t.failed {
			c.failCode = 5
			if g.r.chance(0.3) {
				c.failCode = 11
				c.gasUsed = c.gasWanted + g.r.between(1, 5_000)
			}
		}
		g.fill(c.sig[:])
		g.fill(c.pubkey[1:])
		c.pubkey[0] = 2 + byte(g.r.next()&1)
		c.pubkey = s.accountKeys[c.sender] // the draws above keep the stream of the chain's other content
		g.content = append(g.content, c)
	}
}

// Protobuf appenders, enough to write Cosmos SDK messages.

func pbTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

func pbVarint(b []byte, field int, v uint64) []byte {
	return binary.AppendUvarint(pbTag(b, field, 0), v)
}

func pbBytes(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(pbTag(b, field, 2), uint64(len(v)))
	return append(b, v...)
}

func pbString(b []byte, field int, v string) []byte {
	b = binary.AppendUvarint(pbTag(b, field, 2), uint64(len(v)))
	return append(b, v...)
}

func pbCoin(b []byte, field int, denom string, amount uint64) []byte {
	var tmp [96]byte
	var num [20]byte
	c := pbString(tmp[:0], 1, denom)
	c = pbBytes(c, 2, strconv.AppendUint(num[:0], amount, 10))
	return pbBytes(b, field, c)
}

// packetData renders an ICS-20 packet's JSON into g.num.
func (g *generator) packetData(amount uint64, denom, receiver, sender string) []byte {
	g.num = append(g.num[:0], `{"amount":"`...)
	g.num = strconv.AppendUint(g.num, amount, 10)
	g.num = append(g.num, `","denom":"`...)
	g.num = append(g.num, denom...)
	g.num = append(g.num, `","receiver":"`...)
	g.num = append(g.num, receiver...)
	g.num = append(g.num, `","sender":"`...)
	g.num = append(g.num, sender...)
	g.num = append(g.num, `"}`...)
	return g.num
}

// encodeTx appends the TxRaw bytes of c to dst.
func (g *generator) encodeTx(dst []byte, c *txContent) []byte {
	s := g.s
	t := c.plan
	sender := s.accounts[c.sender]
	body := g.pb[0][:0]
	for i := range int(t.msgs) {
		msg := g.pb[2][:0]
		typ := msgTypes[t.kind][0]
		switch t.kind {
		case kindSend:
			msg = pbString(msg, 1, sender)
			msg = pbString(msg, 2, s.accounts[c.recipient])
			msg = pbCoin(msg, 3, "uatom", c.amount)
		case kindIBCTransfer:
			route := &ibcRoutes[c.route]
			msg = pbString(msg, 1, "transfer")
			msg = pbString(msg, 2, route.channel)
			msg = pbCoin(msg, 3, "uatom", c.amount)
			msg = pbString(msg, 4, sender)
			msg = pbString(msg, 5, s.remote[c.route][c.remote])
			msg = pbBytes(msg, 6, nil)
			msg = pbVarint(msg, 7, c.timeout)
		case kindWithdraw:
			msg = pbString(msg, 1, sender)
			msg = pbString(msg, 2, s.vals[c.vals[i]].operator)
		case kindDelegate:
			msg = pbString(msg, 1, sender)
			msg = pbString(msg, 2, s.vals[c.vals[0]].operator)
			msg = pbCoin(msg, 3, "uatom", c.amount)
		case kindRelay:
			typ = msgTypes[kindRelay][i]
			route := &ibcRoutes[c.route]
			if i == 0 {
				// A light client header (ibc.lightclients.tendermint.v1.Header,
				// shaped so that its type decodes it): its signed header's
				// commit, mostly signatures.
				commit := pbVarint(g.pb[5][:0], 1, c.clientHeight) // Commit.height
				var sig [64]byte
				for range 3 {
					ts := pbVarint(g.pb[7][:0], 1, c.timeout/1e9) // Timestamp.seconds
					g.pb[7] = ts
					cs := g.pb[6][:0]
					cs = pbVarint(cs, 1, 2) // BLOCK_ID_FLAG_COMMIT
					g.fill(sig[:20])
					cs = pbBytes(cs, 2, sig[:20]) // validator_address
					cs = pbBytes(cs, 3, ts)       // timestamp
					g.fill(sig[:])
					cs = pbBytes(cs, 4, sig[:]) // signature
					g.pb[6] = cs
					commit = pbBytes(commit, 4, cs) // Commit.signatures
				}
				g.pb[5] = commit
				sh := pbBytes(g.pb[6][:0], 2, commit) // SignedHeader.commit
				g.pb[6] = sh
				hdr := pbBytes(g.pb[3][:0], 1, sh) // Header.signed_header
				g.pb[3] = hdr
				anyHdr := g.pb[4][:0]
				anyHdr = pbString(anyHdr, 1, "/ibc.lightclients.tendermint.v1.Header")
				anyHdr = pbBytes(anyHdr, 2, hdr)
				g.pb[4] = anyHdr
				msg = pbString(msg, 1, route.client)
				msg = pbBytes(msg, 2, anyHdr)
				msg = pbString(msg, 3, sender)
			} else {
				data := g.packetData(c.amount, route.remoteDenom, s.accounts[c.recipient], s.remote[c.route][c.remote])
				pkt := g.pb[3][:0]
				pkt = pbVarint(pkt, 1, c.packetSeq)
				pkt = pbString(pkt, 2, "transfer")
				pkt = pbString(pkt, 3, route.counterChannel)
				pkt = pbString(pkt, 4, "transfer")
				pkt = pbString(pkt, 5, route.channel)
				pkt = pbBytes(pkt, 6, data)
				pkt = pbVarint(pkt, 8, c.timeout)
				g.pb[3] = pkt
				msg = pbBytes(msg, 1, pkt)
				var proof [96]byte
				g.fill(proof[:])
				msg = pbBytes(msg, 2, proof[:])
				msg = pbBytes(msg, 3, pbVarint(pbVarint(nil, 1, 1), 2, c.clientHeight))
				msg = pbString(msg, 4, sender)
			}
		default: // kindVote
			msg = pbVarint(msg, 1, c.proposal)
			msg = pbString(msg, 2, sender)
			msg = pbVarint(msg, 3, 1)
		}
		g.pb[2] = msg
		anyMsg := g.pb[1][:0]
		anyMsg = pbString(anyMsg, 1, typ)
		anyMsg = pbBytes(anyMsg, 2, msg)
		g.pb[1] = anyMsg
		body = pbBytes(body, 1, anyMsg)
	}
	if c.memo != 0 {
		var tmp [20]byte
		body = pbBytes(body, 2, strconv.AppendUint(tmp[:0], c.memo, 10))
	}
	g.pb[0] = body
	dst = pbBytes(dst, 1, body)

	// AuthInfo: one secp256k1 signer in direct mode, and the fee.
	pk := pbBytes(g.pb[3][:0], 1, c.pubkey[:])
	g.pb[3] = pk
	pkAny := pbString(g.pb[2][:0], 1, "/cosmos.crypto.secp256k1.PubKey")
	pkAny = pbBytes(pkAny, 2, pk)
	g.pb[2] = pkAny
	signer := pbBytes(g.pb[1][:0], 1, pkAny)
	signer = append(signer, 0x12, 0x04, 0x0a, 0x02, 0x08, 0x01) // mode_info: single, SIGN_MODE_DIRECT
	signer = pbVarint(signer, 3, c.seq)
	g.pb[1] = signer
	auth := pbBytes(g.pb[0][:0], 1, signer)
	fee := pbCoin(g.pb[4][:0], 1, "uatom", c.fee)
	fee = pbVarint(fee, 2, c.gasWanted)
	g.pb[4] = fee
	auth = pbBytes(auth, 2, fee)
	g.pb[0] = auth
	dst = pbBytes(dst, 2, auth)
	return pbBytes(dst, 3, c.sig[:])
}

var msgIndex = [...]string{"0", "1", "2"}

// txEvents renders the events of c: what txEventCount counts.
func (g *generator) txEvents(c *txContent) {
	s := g.s
	m := &s.modules
	t := c.plan
	sender := s.accounts[c.sender]

	g.send(sender, m.feeCollector, c.fee, "uatom", inTx(""))
	g.messageSender(sender, inTx(""))
	g.ev("tx")
	g.attrCoin("fee", c.fee, "uatom")
	g.attr("fee_payer", sender)
	g.end("")
	g.ev("tx")
	g.num = append(append(g.num[:0], sender...), '/')
	g.num = strconv.AppendUint(g.num, c.seq, 10)
	g.attrBytes("acc_seq", g.num)
	g.end("")
	g.ev("tx")
	g.num = base64.StdEncoding.AppendEncode(g.num[:0], c.sig[:])
	g.attrBytes("signature", g.num)
	g.end("")
	if t.failed {
		return
	}

	action := func(typ, module, idx string) {
		g.ev("message")
		g.attr("action", typ)
		g.attr("sender", sender)
		g.attr("module", module)
		g.close(inTx(idx))
	}
	switch t.kind {
	case kindSend:
		recipient := s.accounts[c.recipient]
		action(msgTypes[kindSend][0], "bank", "0")
		g.send(sender, recipient, c.amount, "uatom", inTx("0"))
		g.messageSender(sender, inTx("0"))

	case kindIBCTransfer:
		route := &ibcRoutes[c.route]
		receiver := s.remote[c.route][c.remote]
		action(msgTypes[kindIBCTransfer][0], "transfer", "0")
		g.send(sender, route.escrow, c.amount, "uatom", inTx("0"))
		g.messageSender(sender, inTx("0"))
		g.ev("send_packet")
		g.packetAttrs(c, g.packetData(c.amount, "uatom", receiver, sender), "transfer", route.channel, "transfer", route.counterChannel, route.connection)
		g.close(inTx("0"))
		g.messageModule("ibc_channel", inTx("0"))
		g.ev("ibc_transfer")
		g.attr("sender", sender)
		g.attr("receiver", receiver)
		g.attrUint("amount", c.amount)
		g.attr("denom", "uatom")
		g.attr("memo", "")
		g.close(inTx("0"))
		g.messageModule("transfer", inTx("0"))

	case kindWithdraw:
		for i := range int(t.msgs) {
			idx := msgIndex[i]
			reward := c.amount/uint64(i+1) + 1
			action(msgTypes[kindWithdraw][0], "distribution", idx)
			g.send(m.distribution, sender, reward, "uatom", inTx(idx))
			g.messageSender(m.distribution, inTx(idx))
			g.ev("withdraw_rewards")
			g.attrCoin("amount", reward, "uatom")
			g.attr("validator", s.vals[c.vals[i]].operator)
			g.attr("delegator", sender)
			g.close(inTx(idx))
		}

	case kindDelegate:
		action(msgTypes[kindDelegate][0], "staking", "0")
		g.coinEvent("coin_spent", "spender", sender, c.amount, "uatom", inTx("0"))
		g.coinEvent("coin_received", "receiver", m.bonded, c.amount, "uatom", inTx("0"))
		g.ev("delegate")
		g.attr("validator", s.vals[c.vals[0]].operator)
		g.attr("delegator", sender)
		g.attrCoin("amount", c.amount, "uatom")
		g.attrDec("new_shares", c.amount, "")
		g.close(inTx("0"))

	case kindRelay:
		route := &ibcRoutes[c.route]
		receiver := s.accounts[c.recipient]
		remoteSender := s.remote[c.route][c.remote]
		action(msgTypes[kindRelay][0], "ibc_client", "0")
		g.ev("update_client")
		g.attr("client_id", route.client)
		g.attr("client_type", "07-tendermint")
		g.num = strconv.AppendUint(append(g.num[:0], "1-"...), c.clientHeight, 10)
		g.attrBytes("consensus_height", g.num)
		g.attrBytes("consensus_heights", g.num)
		g.close(inTx("0"))
		action(msgTypes[kindRelay][1], "ibc_channel", "1")
		g.ev("recv_packet")
		g.packetAttrs(c, g.packetData(c.amount, route.remoteDenom, receiver, remoteSender), "transfer", route.counterChannel, "transfer", route.channel, route.connection)
		g.close(inTx("1"))
		g.messageModule("ibc_channel", inTx("1"))
		g.coinEvent("coinbase", "minter", m.transfer, c.amount, route.voucher, inTx("1"))
		g.coinEvent("coin_received", "receiver", receiver, c.amount, route.voucher, inTx("1"))
		g.transfer(receiver, m.transfer, c.amount, route.voucher, inTx("1"))
		g.ev("fungible_token_packet")
		g.attr("module", "transfer")
		g.attr("sender", remoteSender)
		g.attr("receiver", receiver)
		g.attr("denom", route.remoteDenom)
		g.attrUint("amount", c.amount)
		g.attr("memo", "")
		g.attr("success", "true")
		g.close(inTx("1"))
		g.ev("write_acknowledgement")
		g.packetAttrs(c, g.packetData(c.amount, route.remoteDenom, receiver, remoteSender), "transfer", route.counterChannel, "transfer", route.channel, route.connection)
		g.attrJSON("packet_ack", []byte(`{"result":"AQ=="}`))
		g.attr("packet_ack_hex", "7b22726573756c74223a2241513d3d227d")
		g.close(inTx("1"))
		g.messageModule("ibc_channel", inTx("1"))

	default: // kindVote
		action(msgTypes[kindVote][0], "governance", "0")
		g.ev("proposal_vote")
		g.attrJSON("option", []byte(`{"option":1,"weight":"1.000000000000000000"}`))
		g.attrUint("proposal_id", c.proposal)
		g.attr("voter", sender)
		g.close(inTx("0"))
	}
}

// packetAttrs adds the attributes ibc-go puts on packet events.
func (g *generator) packetAttrs(c *txContent, data []byte, srcPort, srcChannel, dstPort, dstChannel, connection string) {
	g.attrJSON("packet_data", data)
	g.attrKey("packet_data_hex")
	g.lit(`"`)
	g.b = hex.AppendEncode(g.b, data)
	g.lit(`","index":true}`)
	g.attr("packet_timeout_height", "0-0")
	g.attrUint("packet_timeout_timestamp", c.timeout)
	g.attrUint("packet_sequence", c.packetSeq)
	g.attr("packet_src_port", srcPort)
	g.attr("packet_src_channel", srcChannel)
	g.attr("packet_dst_port", dstPort)
	g.attr("packet_dst_channel", dstChannel)
	g.attr("packet_channel_ordering", "ORDER_UNORDERED")
	g.attr("packet_connection", connection)
	g.attr("connection_id", connection)
}
