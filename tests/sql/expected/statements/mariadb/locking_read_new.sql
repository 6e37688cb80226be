INSERT INTO bpm_flow_repository (instant_id, graph, states, vars, creator, create_time, updater, update_time) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE instant_id = bpm_flow_repository.instant_id
-- params:
{'create_time': datetime.datetime(2026, 1, 2, 3, 4, 5),
 'creator': 'alice',
 'graph': {'id': 'leave', 'nodes': [{'id': 'start', 'type': 'start'}]},
 'instant_id': 'i-1',
 'states': {'leave:n1': 1001},
 'update_time': datetime.datetime(2026, 1, 2, 3, 4, 5),
 'updater': 'alice',
 'vars': {'days': 3, 'name': '流程'}}

SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.instant_id 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s FOR UPDATE
-- params:
{'instant_id_1': 'i-1'}
