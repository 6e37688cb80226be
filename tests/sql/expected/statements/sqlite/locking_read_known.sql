INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator, create_time, updater, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (instant_id) DO UPDATE SET instant_id = excluded.instant_id RETURNING states, vars, graph
-- params:
{'create_time': datetime.datetime(2026, 1, 2, 3, 4, 5),
 'creator': 'alice',
 'graph': {'id': 'leave', 'nodes': [{'id': 'start', 'type': 'start'}]},
 'instant_id': 'i-1',
 'states': {'leave:n1': 1001},
 'update_time': datetime.datetime(2026, 1, 2, 3, 4, 5),
 'updater': 'alice',
 'vars': {'days': 3, 'name': '流程'}}
