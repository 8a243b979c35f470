-- rondo: MariaDB application user and database.
-- Mounted into /docker-entrypoint-initdb.d by docker-compose.yml (runs once, as
-- root, on a fresh data volume, after MARIADB_USER/MARIADB_DATABASE are created).
-- Also safe to run by hand on a native server:  mariadb -uroot < scripts/mysql-init.sql
-- (scripts/services.sh runs the same statements itself).
--
-- Tests create their own databases named rondo_t_..., hence the wildcard grant
-- on `rondo%` rather than just `rondo`.
CREATE DATABASE IF NOT EXISTS `rondo`;

CREATE USER IF NOT EXISTS 'rondo'@'%'         IDENTIFIED BY 'rondo';
CREATE USER IF NOT EXISTS 'rondo'@'localhost' IDENTIFIED BY 'rondo';
CREATE USER IF NOT EXISTS 'rondo'@'127.0.0.1' IDENTIFIED BY 'rondo';

GRANT ALL PRIVILEGES ON `rondo%`.* TO 'rondo'@'%';
GRANT ALL PRIVILEGES ON `rondo%`.* TO 'rondo'@'localhost';
GRANT ALL PRIVILEGES ON `rondo%`.* TO 'rondo'@'127.0.0.1';

FLUSH PRIVILEGES;
