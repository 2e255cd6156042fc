package hosts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// replayWindow is how far below the highest sequence number accepted from
// a node a report may still be taken (once). hostd stamps reports from
// several goroutines (heartbeats, each task's progress, results, pulls)
// and controld handles them concurrently, so they are not claimed in the
// order they were stamped; a strict "greater than the last" would refuse
// legitimate reports that merely lost a race. The window is the anti-replay
// window of IPsec (RFC 4303 §3.4.3) and DTLS: a bitmap of which of the
// last replayWindow numbers were seen.
const replayWindow = 256

// errReplayed refuses a report whose sequence number was already accepted,
// or is too old to tell.
var errReplayed = api.Errorf(api.CodeUnauthenticated, "report refused: sequence number already seen or too old")

// seqWindow is a node's anti-replay state: the highest sequence number
// accepted and which of the replayWindow numbers up to it were (bit i set:
// high-i was accepted).
type seqWindow struct {
	high uint64
	seen *big.Int
}

var windowMask = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), replayWindow), big.NewInt(1))

// accept records seq and reports whether it is new: above high (the
// window slides up), or inside the window and not seen yet. Zero is never
// accepted: it is what a report without a stamp carries.
func (w *seqWindow) accept(seq uint64) bool {
	if w.seen == nil {
		w.seen = new(big.Int)
	}
	switch {
	case seq == 0:
		return false
	case seq > w.high:
		shift := seq - w.high
		if shift >= replayWindow {
			w.seen.SetInt64(0)
		} else {
			w.seen.Lsh(w.seen, uint(shift)).And(w.seen, windowMask)
		}
		w.high = seq
		w.seen.SetBit(w.seen, 0, 1)
		return true
	}
	off := w.high - seq
	if off >= replayWindow || w.seen.Bit(int(off)) == 1 {
		return false
	}
	w.seen.SetBit(w.seen, int(off), 1)
	return true
}

// claimSeq accepts seq for nodeID once, across every controld replica:
// the node's window is read and written under a row lock in Postgres.
func (d *Service) claimSeq(ctx context.Context, nodeID string, seq uint64) error {
	if seq == 0 || seq > math.MaxInt64 {
		return errReplayed
	}
	return pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		var high int64
		var seen []byte
		err := tx.QueryRow(ctx, `SELECT high, seen FROM node_report_seq WHERE node_id = $1 FOR UPDATE`, nodeID).Scan(&high, &seen)
		if errors.Is(err, pgx.ErrNoRows) {
			// The node's first stamped report: another replica may be
			// inserting the row too, so insert-or-nothing and lock it.
			if _, err := tx.Exec(ctx, `INSERT INTO node_report_seq (node_id, high, seen, updated_at)
				VALUES ($1, 0, $2, $3) ON CONFLICT (node_id) DO NOTHING`, nodeID, []byte{}, d.now()); err != nil {
				return fmt.Errorf("claim report sequence: %w", err)
			}
			err = tx.QueryRow(ctx, `SELECT high, seen FROM node_report_seq WHERE node_id = $1 FOR UPDATE`, nodeID).Scan(&high, &seen)
		}
		if err != nil {
			return fmt.Errorf("claim report sequence: %w", err)
		}
		w := seqWindow{high: uint64(high), seen: new(big.Int).SetBytes(seen)}
		if !w.accept(seq) {
			return errReplayed
		}
		if _, err := tx.Exec(ctx, `UPDATE node_report_seq SET high = $2, seen = $3, updated_at = $4 WHERE node_id = $1`,
			nodeID, int64(w.high), w.seen.Bytes(), d.now()); err != nil {
			return fmt.Errorf("claim report sequence: %w", err)
		}
		return nil
	})
}
