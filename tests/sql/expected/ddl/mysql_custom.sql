CREATE TABLE flow.acme_repo (
	id BIGINT NOT NULL AUTO_INCREMENT, 
	instant_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	graph JSON, 
	states JSON, 
	vars JSON, 
	creator VARCHAR(64), 
	create_time DATETIME, 
	updater VARCHAR(64), 
	update_time DATETIME, 
	graph_id VARCHAR(64) COLLATE utf8mb4_0900_bin, 
	status INTEGER, 
	finish_time DATETIME, 
	open_tasks JSON, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_acme_repo_instant_id UNIQUE (instant_id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX ix_acme_repo_status ON flow.acme_repo (status, graph_id, id);

CREATE TABLE flow.acme_task (
	id BIGINT NOT NULL AUTO_INCREMENT, 
	flow_ins_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	proc_def_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	task_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	source_node_code VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	source_node_name VARCHAR(64), 
	source_node_type VARCHAR(64) NOT NULL, 
	target_node_code VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	target_node_name VARCHAR(64) NOT NULL, 
	target_node_type VARCHAR(64) NOT NULL, 
	assignee VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	status INTEGER, 
	form_id BIGINT, 
	variables JSON, 
	message TEXT, 
	creator VARCHAR(64), 
	create_time DATETIME, 
	updater VARCHAR(64), 
	update_time DATETIME, 
	action INTEGER, 
	PRIMARY KEY (id)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX ix_acme_task_assignee ON flow.acme_task (assignee);

CREATE INDEX ix_acme_task_flow_ins_id ON flow.acme_task (flow_ins_id);

CREATE TABLE flow.acme_repo_todo (
	id BIGINT NOT NULL AUTO_INCREMENT, 
	instant_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	graph_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	node_id VARCHAR(64) COLLATE utf8mb4_0900_bin NOT NULL, 
	node_name VARCHAR(64), 
	state INTEGER NOT NULL, 
	candidate VARCHAR(128) COLLATE utf8mb4_0900_bin NOT NULL, 
	lineage JSON, 
	create_time DATETIME, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_acme_repo_todo_task UNIQUE (instant_id, node_id, candidate)
)ENGINE=InnoDB CHARSET=utf8mb4 COLLATE utf8mb4_unicode_ci;

CREATE INDEX ix_acme_repo_todo_candidate ON flow.acme_repo_todo (candidate, id);
