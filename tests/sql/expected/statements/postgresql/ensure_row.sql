INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator, create_time, updater, update_time) VALUES (%(instant_id)s::VARCHAR, %(graph)s::JSON, %(states)s::JSON, %(vars)s::JSON, %(creator)s::VARCHAR, %(create_time)s::TIMESTAMP WITHOUT TIME ZONE, %(updater)s::VARCHAR, %(update_time)s::TIMESTAMP WITHOUT TIME ZONE) ON CONFLICT (instant_id) DO NOTHING
-- params:
{'create_time': datetime.datetime(2026, 1, 2, 3, 4, 5),
 'creator': 'alice',
 'graph': {'id': 'leave', 'nodes': [{'id': 'start', 'type': 'start'}]},
 'instant_id': 'i-1',
 'states': {'leave:n1': 1001},
 'update_time': datetime.datetime(2026, 1, 2, 3, 4, 5),
 'updater': 'alice',
 'vars': {'days': 3, 'name': '流程'}}
