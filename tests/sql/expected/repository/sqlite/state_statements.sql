-- locking read, instance not known to this process
INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) VALUES (?, ?, ?, ?, ?) ON CONFLICT (instant_id) DO UPDATE SET instant_id = excluded.instant_id RETURNING states, vars, graph

-- locking read, instance known
INSERT INTO bpm_flow_repository (instant_id, creator, create_time, updater, update_time) VALUES (?, ?, ?, ?, ?) ON CONFLICT (instant_id) DO UPDATE SET instant_id = excluded.instant_id RETURNING states, vars, graph

-- flush
INSERT INTO bpm_flow_repository (instant_id, states, vars, creator, create_time, updater, update_time) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (instant_id) DO UPDATE SET states = excluded.states, vars = excluded.vars, updater = excluded.updater, update_time = excluded.update_time

-- flush of a new instance (with its graph)
INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator, create_time, updater, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (instant_id) DO UPDATE SET graph = excluded.graph, states = excluded.states, vars = excluded.vars, updater = excluded.updater, update_time = excluded.update_time
