SELECT bpm_flow_repository.id, CAST(bpm_flow_repository.graph AS CHAR) AS graph, bpm_flow_repository.states, bpm_flow_repository.vars, bpm_flow_repository.creator, bpm_flow_repository.create_time, bpm_flow_repository.updater, bpm_flow_repository.update_time 
FROM bpm_flow_repository 
WHERE bpm_flow_repository.instant_id = %s AND CAST(CAST(bpm_flow_repository.instant_id AS CHAR CHARACTER SET utf8mb4) AS BINARY) = CAST(CAST(%s AS CHAR CHARACTER SET utf8mb4) AS BINARY)
-- params:
{'instant_id_1': 'i-1', 'param_1': 'i-1'}
