package api

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// getBlocks is GET /v1/accounts/{id}/blocks: the account's credit blocks in the order a charge
// spends them, each saying whether it can be spent now.
func (s *Server) getBlocks(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	blocks, err := s.opts.Ledger.Blocks(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	now := time.Now()
	out := apitype.BlockList{AccountID: id, Blocks: make([]apitype.Block, len(blocks))}
	for i, b := range blocks {
		out.Blocks[i] = blockOf(b, now)
	}
	return http.StatusOK, out, nil
}

// getStatement is GET /v1/accounts/{id}/statement?from=&to=[&format=csv]: the account's statement
// for the period, as JSON, or as the CSV every door hands out (ledgerdb.WriteStatementCSV) when
// format=csv. The format is chosen by the query rather than the Accept header so that a plain
// link downloads the CSV.
func (s *Server) getStatement(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	format := q.Get("format")
	if format != "" && format != "json" && format != "csv" {
		return 0, nil, badRequest("Query parameter \"format\" is %q; it must be json (the default) or csv", clipped(format))
	}
	from, to, err := periodParams(q)
	if err != nil {
		return 0, nil, err
	}
	st, err := s.opts.Ledger.Statement(r.Context(), id, from, to)
	if err != nil {
		return 0, nil, err
	}
	if format != "csv" {
		return http.StatusOK, statementOf(st), nil
	}
	var csv bytes.Buffer
	if err := ledgerdb.WriteStatementCSV(&csv, st); err != nil {
		return 0, nil, err
	}
	// The file's name says whether the statement is final, as its first line does.
	return http.StatusOK, fileAnswer{contentType: "text/csv; charset=utf-8", body: csv.Bytes(),
		filename: fmt.Sprintf("statement-%s-%s-%s-%s.csv", id, st.From.Format("20060102T150405Z"), st.To.Format("20060102T150405Z"), st.Status())}, nil
}

// getRevenue is GET /v1/revenue?from=&to=[&account_id=] (admin): what paid credits did over the
// period, valued at their blocks' cost basis — recognised, deferred and lapsed — over every
// account or one.
func (s *Server) getRevenue(_ http.ResponseWriter, r *http.Request, _ *principal) (int, any, error) {
	q := r.URL.Query()
	from, to, err := periodParams(q)
	if err != nil {
		return 0, nil, err
	}
	account := q.Get("account_id")
	if account != "" {
		if err := ledgerdb.ValidateID("account_id", account); err != nil {
			return 0, nil, err
		}
	}
	report, err := s.opts.Ledger.Revenue(r.Context(), from, to, account)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, revenueOf(report), nil
}
