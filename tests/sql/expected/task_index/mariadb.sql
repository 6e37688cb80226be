-- locking read with the index columns (instance not known / known)
INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE instant_id = bpm_flow_repository.instant_id

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.finish_time, bpm_flow_repository.open_tasks, bpm_flow_repository.instant_id 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s FOR UPDATE

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.finish_time, bpm_flow_repository.open_tasks, bpm_flow_repository.instant_id 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s FOR UPDATE

-- flush of a locked row whose aggregate changed
UPDATE bpm_flow_repository SET states=%s, vars=%s, updater=%s, update_time=%s, graph_id=%s, status=%s, finish_time=%s, open_tasks=%s WHERE bpm_flow_repository.instant_id = %s

-- open-task rows: delete, state update, insert (each one executemany)
DELETE FROM bpm_flow_todo USING bpm_flow_todo, bpm_flow_repository WHERE bpm_flow_todo.instant_id = %s AND bpm_flow_todo.node_id = %s AND bpm_flow_todo.candidate = %s AND bpm_flow_repository.instant_id = %s AND bpm_flow_todo.instant_id = bpm_flow_repository.instant_id

UPDATE bpm_flow_todo, bpm_flow_repository SET bpm_flow_todo.state=%s WHERE bpm_flow_todo.instant_id = %s AND bpm_flow_todo.node_id = %s AND bpm_flow_todo.candidate = %s AND bpm_flow_repository.instant_id = %s AND bpm_flow_todo.instant_id = bpm_flow_repository.instant_id

INSERT INTO bpm_flow_todo (instant_id, graph_id, node_id, node_name, state, candidate, lineage, create_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)

-- open-task rows' insert on MySQL/MariaDB (keeps an instance's sentinel row)
INSERT INTO bpm_flow_todo (instant_id, graph_id, node_id, node_name, state, candidate, lineage, create_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE graph_id = VALUES(graph_id), node_name = VALUES(node_name), state = VALUES(state), lineage = VALUES(lineage), create_time = VALUES(create_time)

-- the same, two rows in one statement (sent together with the row's UPDATE)
INSERT INTO bpm_flow_todo (instant_id, graph_id, node_id, node_name, state, candidate, lineage, create_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s), (%s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE graph_id = VALUES(graph_id), node_name = VALUES(node_name), state = VALUES(state), lineage = VALUES(lineage), create_time = VALUES(create_time)

-- inbox page: one identity, first page
SELECT bpm_flow_todo.id, bpm_flow_todo.instant_id, bpm_flow_todo.graph_id, bpm_flow_todo.node_id, bpm_flow_todo.node_name, bpm_flow_todo.state, bpm_flow_todo.candidate, bpm_flow_todo.lineage, bpm_flow_todo.create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.candidate = %s AND NOT (EXISTS (SELECT %s AS anon_1 
FROM bpm_flow_todo AS other 
WHERE other.instant_id = bpm_flow_todo.instant_id AND other.node_id = bpm_flow_todo.node_id AND other.candidate IN (__[POSTCOMPILE_candidate_2]) AND other.id < bpm_flow_todo.id)) ORDER BY bpm_flow_todo.id 
 LIMIT %s

-- inbox page: two identities, one graph, after a cursor
SELECT pages.id, pages.instant_id, pages.graph_id, pages.node_id, pages.node_name, pages.state, pages.candidate, pages.lineage, pages.create_time 
FROM (SELECT page0.id AS id, page0.instant_id AS instant_id, page0.graph_id AS graph_id, page0.node_id AS node_id, page0.node_name AS node_name, page0.state AS state, page0.candidate AS candidate, page0.lineage AS lineage, page0.create_time AS create_time 
FROM (SELECT bpm_flow_todo.id AS id, bpm_flow_todo.instant_id AS instant_id, bpm_flow_todo.graph_id AS graph_id, bpm_flow_todo.node_id AS node_id, bpm_flow_todo.node_name AS node_name, bpm_flow_todo.state AS state, bpm_flow_todo.candidate AS candidate, bpm_flow_todo.lineage AS lineage, bpm_flow_todo.create_time AS create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.candidate = %s AND NOT (EXISTS (SELECT %s AS anon_1 
FROM bpm_flow_todo AS other 
WHERE other.instant_id = bpm_flow_todo.instant_id AND other.node_id = bpm_flow_todo.node_id AND other.candidate IN (__[POSTCOMPILE_candidate_2]) AND other.id < bpm_flow_todo.id)) AND bpm_flow_todo.graph_id = %s AND bpm_flow_todo.id > %s ORDER BY bpm_flow_todo.id 
 LIMIT %s) AS page0 UNION ALL SELECT page1.id AS id, page1.instant_id AS instant_id, page1.graph_id AS graph_id, page1.node_id AS node_id, page1.node_name AS node_name, page1.state AS state, page1.candidate AS candidate, page1.lineage AS lineage, page1.create_time AS create_time 
FROM (SELECT bpm_flow_todo.id AS id, bpm_flow_todo.instant_id AS instant_id, bpm_flow_todo.graph_id AS graph_id, bpm_flow_todo.node_id AS node_id, bpm_flow_todo.node_name AS node_name, bpm_flow_todo.state AS state, bpm_flow_todo.candidate AS candidate, bpm_flow_todo.lineage AS lineage, bpm_flow_todo.create_time AS create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.candidate = %s AND NOT (EXISTS (SELECT %s AS anon_1 
FROM bpm_flow_todo AS other 
WHERE other.instant_id = bpm_flow_todo.instant_id AND other.node_id = bpm_flow_todo.node_id AND other.candidate IN (__[POSTCOMPILE_candidate_2]) AND other.id < bpm_flow_todo.id)) AND bpm_flow_todo.graph_id = %s AND bpm_flow_todo.id > %s ORDER BY bpm_flow_todo.id 
 LIMIT %s) AS page1) AS pages ORDER BY pages.id 
 LIMIT %s

-- open tasks of one instance
SELECT bpm_flow_todo.id, bpm_flow_todo.instant_id, bpm_flow_todo.graph_id, bpm_flow_todo.node_id, bpm_flow_todo.node_name, bpm_flow_todo.state, bpm_flow_todo.candidate, bpm_flow_todo.lineage, bpm_flow_todo.create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.instant_id = %s ORDER BY bpm_flow_todo.id

-- status of one instance
SELECT bpm_flow_repository.status 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s

-- instances page: any status / running in one graph by a creator, after a cursor
SELECT bpm_flow_repository.id, bpm_flow_repository.instant_id, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.creator, bpm_flow_repository.create_time, bpm_flow_repository.update_time, bpm_flow_repository.finish_time 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.status IS NOT NULL ORDER BY bpm_flow_repository.id DESC 
 LIMIT %s

SELECT bpm_flow_repository.id, bpm_flow_repository.instant_id, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.creator, bpm_flow_repository.create_time, bpm_flow_repository.update_time, bpm_flow_repository.finish_time 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.status = %s AND bpm_flow_repository.graph_id = %s AND (bpm_flow_repository.creator COLLATE utf8mb4_nopad_bin) = %s AND bpm_flow_repository.id < %s ORDER BY bpm_flow_repository.id DESC 
 LIMIT %s
