INSERT INTO pgbench_branches SELECT g, 0, '' FROM generate_series(1, $1::int) AS g;
