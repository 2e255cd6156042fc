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

// claimSeq accepts seq for nodeID once, across every controld replica.
// The node's window is kept in Postgres. The common case is one statement:
// the window this replica last wrote or read, advanced by seq, replaces
// the stored one only if that is still unchanged (compare-and-set: a
// window only ever gains numbers, so an unchanged high and bitmap are an
// unchanged window). A window another replica moved meanwhile, one not
// cached yet, or a number the cached window refuses is decided under the
// row lock, from the stored window.
func (d *Service) claimSeq(ctx context.Context, nodeID string, seq uint64) error {
	if seq == 0 || seq > math.MaxInt64 {
		return errReplayed
	}
	d.seqMu.Lock()
	cached, ok := d.seqs[nodeID]
	d.seqMu.Unlock()
	if ok {
		next := seqWindow{high: cached.high, seen: new(big.Int).SetBytes(cached.seen)}
		if next.accept(seq) {
			tag, err := d.cfg.Pool.Exec(ctx, `UPDATE node_report_seq SET high = $2, seen = $3, updated_at = $4
				WHERE node_id = $1 AND high = $5 AND seen IS NOT DISTINCT FROM $6`,
				nodeID, int64(next.high), next.seen.Bytes(), d.now(), int64(cached.high), cached.seen)
			if err != nil {
				return fmt.Errorf("claim report sequence: %w", err)
			}
			if tag.RowsAffected() == 1 {
				d.cacheSeq(nodeID, storedWindow{high: next.high, seen: next.seen.Bytes()})
				return nil
			}
		}
	}
	var stored storedWindow
	err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		// The row stays locked between the SELECT and the UPDATE: a
		// replica cut off from Postgres in between would hold every report
		// of the node (heartbeats on every replica) for as long as the
		// server keeps its session, so the server ends it soon.
		if _, err := tx.Exec(ctx, `SET LOCAL idle_in_transaction_session_timeout = '2s'`); err != nil {
			return fmt.Errorf("claim report sequence: %w", err)
		}
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
			// Not cached: the stored window stays the one this replica
			// last wrote, and a refusal is rare.
			return errReplayed
		}
		stored = storedWindow{high: w.high, seen: w.seen.Bytes()}
		if _, err := tx.Exec(ctx, `UPDATE node_report_seq SET high = $2, seen = $3, updated_at = $4 WHERE node_id = $1`,
			nodeID, int64(stored.high), stored.seen, d.now()); err != nil {
			return fmt.Errorf("claim report sequence: %w", err)
		}
		return nil
	})
	if err == nil {
		// Cached once committed: a rolled-back write must not become the
		// window the next compare-and-set expects.
		d.cacheSeq(nodeID, stored)
	}
	return err
}

// storedWindow is a node's window as stored: high and the bitmap's bytes.
type storedWindow struct {
	high uint64
	seen []byte
}

// cacheSeq records w as the stored window of nodeID. The cache is only
// the guess the next compare-and-set starts from: a stale one (reports of
// a node racing each other, another replica) costs a locked claim, never
// a wrong answer.
func (d *Service) cacheSeq(nodeID string, w storedWindow) {
	d.seqMu.Lock()
	d.seqs[nodeID] = w
	d.seqMu.Unlock()
}
