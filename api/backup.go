package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Backup is GET /v1/backup on the client's side: it copies the daemon's
// backup stream to w.
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	resp, err := c.do(ctx, "GET", "/v1/backup", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return decodeError(resp.StatusCode, b, nil)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("daemon at %s: backup: %w", c.Base, err)
	}
	return nil
}

// backupRoute is GET /v1/backup: the world's backup, streamed as it is
// read from one consistent view of the store while the world goes on.
func (s *Server) backupRoute(w http.ResponseWriter, r *http.Request) {
	if s.NoBackup != "" {
		writeError(w, newError(http.StatusNotImplemented, CodeUnsupported, "backup", "%s", s.NoBackup))
		return
	}
	if s.Backup == nil {
		writeError(w, newError(http.StatusServiceUnavailable, CodeUnavailable, "backup", "this server has no store to back up"))
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="world.aosbackup"`)
	if err := s.Backup(w); err != nil {
		// The answer has begun: cut it, so the client sees a broken
		// stream (and a backup that does not read back), never a whole one.
		s.Logger.Error("backup failed", "err", err)
		panic(http.ErrAbortHandler)
	}
}
