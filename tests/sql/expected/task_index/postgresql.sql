-- locking read with the index columns (instance not known / known)
INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) VALUES (%(instant_id)s::VARCHAR, %(creator)s::VARCHAR, %(create_time)s::TIMESTAMP WITHOUT TIME ZONE, %(updater)s::VARCHAR, %(update_time)s::TIMESTAMP WITHOUT TIME ZONE) ON CONFLICT (instant_id) DO NOTHING

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.finish_time, bpm_flow_repository.open_tasks 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %(instant_id)s::VARCHAR FOR UPDATE

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.finish_time, bpm_flow_repository.open_tasks 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %(instant_id)s::VARCHAR FOR UPDATE

-- flush of a locked row whose aggregate changed
UPDATE bpm_flow_repository SET states=%(states)s::JSON, vars=%(vars)s::JSON, updater=%(updater)s::VARCHAR, update_time=%(update_time)s::TIMESTAMP WITHOUT TIME ZONE, graph_id=%(graph_id)s::VARCHAR, status=%(status)s::INTEGER, finish_time=%(finish_time)s::TIMESTAMP WITHOUT TIME ZONE, open_tasks=%(open_tasks)s::JSON WHERE bpm_flow_repository.instant_id = %(row_key)s::VARCHAR

-- open-task rows: delete, state update, insert (each one executemany)
DELETE FROM bpm_flow_todo WHERE bpm_flow_todo.instant_id = %(k_instant_id)s::VARCHAR AND bpm_flow_todo.node_id = %(k_node_id)s::VARCHAR AND bpm_flow_todo.candidate = %(k_candidate)s::VARCHAR

UPDATE bpm_flow_todo SET state=%(k_state)s::INTEGER WHERE bpm_flow_todo.instant_id = %(k_instant_id)s::VARCHAR AND bpm_flow_todo.node_id = %(k_node_id)s::VARCHAR AND bpm_flow_todo.candidate = %(k_candidate)s::VARCHAR

INSERT INTO bpm_flow_todo (instant_id, graph_id, node_id, node_name, state, candidate, lineage, create_time) VALUES (%(instant_id)s::VARCHAR, %(graph_id)s::VARCHAR, %(node_id)s::VARCHAR, %(node_name)s::VARCHAR, %(state)s::INTEGER, %(candidate)s::VARCHAR, %(lineage)s::JSON, %(create_time)s::TIMESTAMP WITHOUT TIME ZONE)

-- inbox page: one identity, first page
SELECT bpm_flow_todo.id, bpm_flow_todo.instant_id, bpm_flow_todo.graph_id, bpm_flow_todo.node_id, bpm_flow_todo.node_name, bpm_flow_todo.state, bpm_flow_todo.candidate, bpm_flow_todo.lineage, bpm_flow_todo.create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.candidate = %(candidate_1)s::VARCHAR AND NOT (EXISTS (SELECT %(param_1)s::INTEGER AS anon_1 
FROM bpm_flow_todo AS other 
WHERE other.instant_id = bpm_flow_todo.instant_id AND other.node_id = bpm_flow_todo.node_id AND other.candidate IN (__[POSTCOMPILE_candidate_2]) AND other.id < bpm_flow_todo.id)) ORDER BY bpm_flow_todo.id 
 LIMIT %(param_2)s::INTEGER

-- inbox page: two identities, one graph, after a cursor
SELECT pages.id, pages.instant_id, pages.graph_id, pages.node_id, pages.node_name, pages.state, pages.candidate, pages.lineage, pages.create_time 
FROM (SELECT page0.id AS id, page0.instant_id AS instant_id, page0.graph_id AS graph_id, page0.node_id AS node_id, page0.node_name AS node_name, page0.state AS state, page0.candidate AS candidate, page0.lineage AS lineage, page0.create_time AS create_time 
FROM (SELECT bpm_flow_todo.id AS id, bpm_flow_todo.instant_id AS instant_id, bpm_flow_todo.graph_id AS graph_id, bpm_flow_todo.node_id AS node_id, bpm_flow_todo.node_name AS node_name, bpm_flow_todo.state AS state, bpm_flow_todo.candidate AS candidate, bpm_flow_todo.lineage AS lineage, bpm_flow_todo.create_time AS create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.candidate = %(candidate_1)s::VARCHAR AND NOT (EXISTS (SELECT %(param_1)s::INTEGER AS anon_1 
FROM bpm_flow_todo AS other 
WHERE other.instant_id = bpm_flow_todo.instant_id AND other.node_id = bpm_flow_todo.node_id AND other.candidate IN (__[POSTCOMPILE_candidate_2]) AND other.id < bpm_flow_todo.id)) AND bpm_flow_todo.graph_id = %(graph_id_1)s::VARCHAR AND bpm_flow_todo.id > %(id_1)s::BIGINT ORDER BY bpm_flow_todo.id 
 LIMIT %(param_2)s::INTEGER) AS page0 UNION ALL SELECT page1.id AS id, page1.instant_id AS instant_id, page1.graph_id AS graph_id, page1.node_id AS node_id, page1.node_name AS node_name, page1.state AS state, page1.candidate AS candidate, page1.lineage AS lineage, page1.create_time AS create_time 
FROM (SELECT bpm_flow_todo.id AS id, bpm_flow_todo.instant_id AS instant_id, bpm_flow_todo.graph_id AS graph_id, bpm_flow_todo.node_id AS node_id, bpm_flow_todo.node_name AS node_name, bpm_flow_todo.state AS state, bpm_flow_todo.candidate AS candidate, bpm_flow_todo.lineage AS lineage, bpm_flow_todo.create_time AS create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.candidate = %(candidate_3)s::VARCHAR AND NOT (EXISTS (SELECT %(param_1)s::INTEGER AS anon_1 
FROM bpm_flow_todo AS other 
WHERE other.instant_id = bpm_flow_todo.instant_id AND other.node_id = bpm_flow_todo.node_id AND other.candidate IN (__[POSTCOMPILE_candidate_2]) AND other.id < bpm_flow_todo.id)) AND bpm_flow_todo.graph_id = %(graph_id_2)s::VARCHAR AND bpm_flow_todo.id > %(id_2)s::BIGINT ORDER BY bpm_flow_todo.id 
 LIMIT %(param_3)s::INTEGER) AS page1) AS pages ORDER BY pages.id 
 LIMIT %(param_4)s::INTEGER

-- open tasks of one instance
SELECT bpm_flow_todo.id, bpm_flow_todo.instant_id, bpm_flow_todo.graph_id, bpm_flow_todo.node_id, bpm_flow_todo.node_name, bpm_flow_todo.state, bpm_flow_todo.candidate, bpm_flow_todo.lineage, bpm_flow_todo.create_time 
FROM bpm_flow_todo 
WHERE bpm_flow_todo.instant_id = %(instant_id_1)s::VARCHAR ORDER BY bpm_flow_todo.id

-- status of one instance
SELECT bpm_flow_repository.status 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %(instant_id_1)s::VARCHAR

-- instances page: any status / running in one graph by a creator, after a cursor
SELECT bpm_flow_repository.id, bpm_flow_repository.instant_id, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.creator, bpm_flow_repository.create_time, bpm_flow_repository.update_time, bpm_flow_repository.finish_time 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.status IS NOT NULL ORDER BY bpm_flow_repository.id DESC 
 LIMIT %(param_1)s::INTEGER

SELECT bpm_flow_repository.id, bpm_flow_repository.instant_id, bpm_flow_repository.graph_id, bpm_flow_repository.status, bpm_flow_repository.creator, bpm_flow_repository.create_time, bpm_flow_repository.update_time, bpm_flow_repository.finish_time 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.status = %(status_1)s::INTEGER AND bpm_flow_repository.graph_id = %(graph_id_1)s::VARCHAR AND bpm_flow_repository.creator = %(creator_1)s::VARCHAR AND bpm_flow_repository.id < %(id_1)s::BIGINT ORDER BY bpm_flow_repository.id DESC 
 LIMIT %(param_1)s::INTEGER
