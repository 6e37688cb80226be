-- locking read, instance not known to this process
INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE instant_id = bpm_flow_repository.instant_id

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.instant_id 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s FOR UPDATE

-- locking read, instance known
SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.instant_id 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s FOR UPDATE

-- flush
INSERT INTO bpm_flow_repository (instant_id, states, vars, creator, create_time, updater, update_time) VALUES (%s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE states = VALUES(states), vars = VALUES(vars), updater = VALUES(updater), update_time = VALUES(update_time)

-- flush of a new instance (with its graph)
INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator, create_time, updater, update_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE graph = VALUES(graph), states = VALUES(states), vars = VALUES(vars), updater = VALUES(updater), update_time = VALUES(update_time)
