package controld

import "context"

// ticketCAKeys is what nodes are told to trust for gateway tickets
// (ca.Service.TicketKeys): the node reports' settler hands them on.
func (s *Server) ticketCAKeys(ctx context.Context) ([]string, error) {
	return s.cas.TicketKeys(ctx, s.pool)
}
