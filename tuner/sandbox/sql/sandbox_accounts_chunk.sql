-- Accounts $1..$2. Balances are spread as after pgbench has run for a while: uncorrelated with the
-- physical row order, so an index on them drives sparse bitmap heap scans (where prefetching matters).
INSERT INTO pgbench_accounts (aid, bid, abalance, filler)
SELECT g, (g - 1) / 100000 + 1, hashint4(g) % 5000000, ''
FROM generate_series($1::int, $2::int) AS g
