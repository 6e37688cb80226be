-- locking read, instance not known to this process
INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) VALUES (%(instant_id)s::VARCHAR, %(creator)s::VARCHAR, %(create_time)s::TIMESTAMP WITHOUT TIME ZONE, %(updater)s::VARCHAR, %(update_time)s::TIMESTAMP WITHOUT TIME ZONE) ON CONFLICT (instant_id) DO NOTHING

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %(instant_id)s::VARCHAR FOR UPDATE

-- locking read, instance known
SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %(instant_id)s::VARCHAR FOR UPDATE

-- flush
INSERT INTO bpm_flow_repository (instant_id, states, vars, creator, create_time, updater, update_time) VALUES (%(instant_id)s::VARCHAR, %(states)s::JSON, %(vars)s::JSON, %(creator)s::VARCHAR, %(create_time)s::TIMESTAMP WITHOUT TIME ZONE, %(updater)s::VARCHAR, %(update_time)s::TIMESTAMP WITHOUT TIME ZONE) ON CONFLICT (instant_id) DO UPDATE SET states = excluded.states, vars = excluded.vars, updater = excluded.updater, update_time = excluded.update_time

-- flush of a new instance (with its graph)
INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator, create_time, updater, update_time) VALUES (%(instant_id)s::VARCHAR, %(graph)s::JSON, %(states)s::JSON, %(vars)s::JSON, %(creator)s::VARCHAR, %(create_time)s::TIMESTAMP WITHOUT TIME ZONE, %(updater)s::VARCHAR, %(update_time)s::TIMESTAMP WITHOUT TIME ZONE) ON CONFLICT (instant_id) DO UPDATE SET graph = excluded.graph, states = excluded.states, vars = excluded.vars, updater = excluded.updater, update_time = excluded.update_time
