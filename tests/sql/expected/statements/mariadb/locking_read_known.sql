SELECT bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.graph IS NOT NULL AS has_graph, bpm_flow_repository.instant_id 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s FOR UPDATE
-- params:
{'instant_id_1': 'i-1'}
